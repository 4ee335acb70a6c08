package analysis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/testing/promserver"
)

// errorRateQuery is the 5xx share of a hash's requests; `or vector(0)` keeps a hash that never answered 500
// (no code="500" series yet) at 0 rather than empty.
const errorRateQuery = `(sum(rate(http_requests_total{code=~"5..",pod_template_hash="{{ .NewPodTemplateHash }}"}[10s])) or vector(0))
  / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[10s]))`

// naiveErrorRateQuery is errorRateQuery without `or vector(0)`, as the example writes it.
const naiveErrorRateQuery = `sum(rate(http_requests_total{code=~"5..",pod_template_hash="{{ .NewPodTemplateHash }}"}[10s]))
  / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[10s]))`

// Issue 47 / EX-6 against a real Prometheus (Debian's) scraping an exporter: a good hash (0% 5xx) measures
// Successful with `result < 0.05`, a bad one (40% 5xx) Failed, an unknown hash Inconclusive (empty), the
// naive query on a hash that never failed Inconclusive too (never success on missing data), and with
// Prometheus stopped every measurement is Error.
func TestMeasureAgainstRealPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exporter := promserver.NewExporter(t)
	exporter.SetErrorRate("good1", 0)
	exporter.SetErrorRate("bad1", 0.4)
	prom := promserver.Run(ctx, t, promserver.Config{Targets: []string{exporter.Target()}})
	m := NewMeasurer(Prometheus{DefaultAddress: prom.URL})
	metric := func(query string) Metric {
		return Metric{Name: "error-rate", SuccessCondition: "result < 0.05", Provider: Provider{Prometheus: &PrometheusProvider{Query: query}}}
	}
	measure := func(query, hash string) Measurement {
		return m.Measure(ctx, metric(query), QueryArgs{Namespace: "ns", Deployment: "web", NewPodTemplateHash: hash}, nil)
	}
	waitForRates(t, func() bool {
		return measure(errorRateQuery, "good1").Phase != PhaseInconclusive && measure(errorRateQuery, "bad1").Phase != PhaseInconclusive
	})
	cases := []struct {
		name, query, hash string
		want              Phase
		why               string
	}{
		{"good hash", errorRateQuery, "good1", PhaseSuccessful, "is true"},
		{"bad hash", errorRateQuery, "bad1", PhaseFailed, "is false"},
		{"unknown hash", errorRateQuery, "nope1", PhaseInconclusive, "empty result"},
		{"naive query, hash that never failed", naiveErrorRateQuery, "good1", PhaseInconclusive, "empty result"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := measure(tc.query, tc.hash)
			t.Logf("%s: value %q, %s", got.Phase, got.Value, got.Message)
			if got.Phase != tc.want || !strings.Contains(got.Message, tc.why) || !strings.Contains(got.Query, `pod_template_hash="`+tc.hash+`"`) {
				t.Errorf("Measure = %+v, want %s with %q", got, tc.want, tc.why)
			}
			if tc.hash == "bad1" && (got.Number == nil || *got.Number < 0.35 || *got.Number > 0.45) {
				t.Errorf("bad hash's error rate %v, want about 0.4", got.Number)
			}
		})
	}
	t.Run("Prometheus stopped", func(t *testing.T) {
		prom.Stop()
		got := measure(errorRateQuery, "good1")
		t.Logf("%s: %s", got.Phase, got.Message)
		if got.Phase != PhaseError || !strings.Contains(got.Message, "connection refused") {
			t.Errorf("Measure = %+v, want Error with the cause", got)
		}
	})
}

// waitForRates polls ready until rate() has two scrapes of both hashes (a few seconds), failing t after a
// minute.
func waitForRates(t *testing.T, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ready(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no error rate of both hashes in Prometheus after a minute")
		}
	}
}
