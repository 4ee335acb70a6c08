package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakePrometheus is Prometheus' HTTP API for instant queries, answering each query with a canned body: the
// query text selects one of answers (status code and JSON), "slow" blocks until the client gives up.
type fakePrometheus struct {
	*httptest.Server
	requests atomic.Int32
	timeout  atomic.Value // the last request's timeout parameter
}

type answer struct {
	code int
	body string
}

func vectorOf(values ...string) string {
	var samples []string
	for i, v := range values {
		samples = append(samples, `{"metric":{"pod":"p`+string(rune('0'+i))+`"},"value":[1700000000,"`+v+`"]}`)
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

var answers = map[string]answer{
	"scalar":    {200, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.01"]}}`},
	"one":       {200, vectorOf("0.4")},
	"good":      {200, vectorOf("0.01")},
	"empty":     {200, vectorOf()},
	"two":       {200, vectorOf("0.01", "0.02")},
	"nan":       {200, vectorOf("NaN")},
	"inf":       {200, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"+Inf"]}}`},
	"matrix":    {200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"]]}]}}`},
	"string":    {200, `{"status":"success","data":{"resultType":"string","result":[1700000000,"x"]}}`},
	"bad_data":  {400, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected end of input"}`},
	"execution": {422, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`},
	"proxy500":  {500, `<html>Internal Server Error</html>`},
	"garbage":   {200, `{"status":"success","data":`},
}

func startFakePrometheus(t *testing.T) *fakePrometheus {
	f := &fakePrometheus{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
			http.NotFound(w, r)
			return
		}
		f.timeout.Store(r.Form.Get("timeout"))
		q := r.Form.Get("query")
		if q == "slow" {
			<-r.Context().Done()
			return
		}
		a, ok := answers[q]
		if !ok {
			a = answer{400, `{"status":"error","errorType":"bad_data","error":"unknown canned query"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.code)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(f.Close)
	return f
}

func promMetric(query, address, timeout string) Metric {
	return Metric{Name: "m", SuccessCondition: "result < 0.05",
		Provider: Provider{Prometheus: &PrometheusProvider{Query: query, Address: address, Timeout: timeout}}}
}

// EX-6: every shape of an instant query's answer is classified, and only a single finite value that meets the
// condition is Successful: an empty result (argo-rollouts#1466 panicked on it), several series, NaN and Inf
// are Inconclusive; a wrong result type, a query error, an HTTP error, garbage or a timeout are Error.
func TestMeasurePrometheusResults(t *testing.T) {
	f := startFakePrometheus(t)
	m := NewMeasurer(Prometheus{DefaultAddress: f.URL, Timeout: 200 * time.Millisecond})
	cases := []struct {
		query string
		want  Phase
		value string
		why   string // a substring of Message
	}{
		{"scalar", PhaseSuccessful, "0.01", `result 0.01: successCondition "result < 0.05" is true; query: scalar`},
		{"good", PhaseSuccessful, "0.01", "is true"},
		{"one", PhaseFailed, "0.4", `result 0.4: successCondition "result < 0.05" is false; query: one`},
		{"empty", PhaseInconclusive, "", "empty result: no series matched"},
		{"two", PhaseInconclusive, "", "2 series, want one"},
		{"nan", PhaseInconclusive, "NaN", "result NaN is not a finite number"},
		{"inf", PhaseInconclusive, "+Inf", "result +Inf is not a finite number"},
		{"matrix", PhaseError, "", "result is a matrix, want a scalar or a vector of one sample"},
		{"string", PhaseError, "", `unexpected value type "string"`},
		{"bad_data", PhaseError, "", "answered bad_data: 1:5: parse error"},
		{"execution", PhaseError, "", "answered execution: many-to-many matching not allowed"},
		{"proxy500", PhaseError, "", "server error: 500"},
		{"garbage", PhaseError, "", "Prometheus at " + f.URL + " answered bad_response"},
		{"slow", PhaseError, "", "timed out after 200ms"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			got := m.Measure(context.Background(), promMetric(tc.query, "", ""), QueryArgs{}, nil)
			if got.Phase != tc.want || got.Value != tc.value || !strings.Contains(got.Message, tc.why) || got.Query != tc.query {
				t.Errorf("Measure = %+v, want %s, value %q, message with %q, query %q", got, tc.want, tc.value, tc.why, tc.query)
			}
			if (got.Number != nil) != (tc.want == PhaseSuccessful || tc.want == PhaseFailed) {
				t.Errorf("Number = %v, want one only for a judged value", got.Number)
			}
		})
	}
}

// EX-6: the query sent is the rendered template, with the metric's timeout, else Prometheus.Timeout, else
// DefaultQueryTimeout, as Prometheus' own timeout parameter; a query that does not render is Error unsent.
func TestMeasurePrometheusQuery(t *testing.T) {
	f := startFakePrometheus(t)
	args := QueryArgs{NewPodTemplateHash: "goo", Args: map[string]string{"suffix": "d"}}
	cases := []struct {
		name          string
		p             Prometheus
		query, timout string
		wantTimeout   string
		want          Phase
	}{
		{"rendered", Prometheus{DefaultAddress: f.URL}, "{{ .NewPodTemplateHash }}{{ .Args.suffix }}", "", "10s", PhaseSuccessful},
		{"flag timeout", Prometheus{DefaultAddress: f.URL, Timeout: 3 * time.Second}, "good", "", "3s", PhaseSuccessful},
		{"template timeout", Prometheus{DefaultAddress: f.URL, Timeout: 3 * time.Second}, "good", "20s", "20s", PhaseSuccessful},
		{"missing arg", Prometheus{DefaultAddress: f.URL}, "{{ .Args.nope }}", "", "", PhaseError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.requests.Load()
			f.timeout.Store("")
			got := NewMeasurer(tc.p).Measure(context.Background(), promMetric(tc.query, "", tc.timout), args, nil)
			if got.Phase != tc.want {
				t.Errorf("Measure = %+v, want %s", got, tc.want)
			}
			if tc.wantTimeout == "" {
				if f.requests.Load() != before {
					t.Errorf("a query that does not render was sent")
				}
				return
			}
			if got.Query != "good" {
				t.Errorf("query sent %q, want %q", got.Query, "good")
			}
			if timeout := f.timeout.Load(); timeout != tc.wantTimeout {
				t.Errorf("timeout parameter %q, want %q", timeout, tc.wantTimeout)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	cases := []struct {
		name string
		f    float64
		want string
	}{
		{"float noise", 0.3999999999999999, "0.4"},
		{"sum noise", 0.1 + 0.2, "0.3"},
		{"integer", 1234567, "1234567"},
		{"zero", 0, "0"},
		{"small", 1e-7, "1e-07"},
		{"negative", -2.5, "-2.5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatValue(tc.f); got != tc.want {
				t.Errorf("formatValue(%v) = %q, want %q", tc.f, got, tc.want)
			}
		})
	}
}
