package promserver

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape returns the exporter's http_requests_total samples as "hash code" → value.
func scrape(t *testing.T, e *Exporter) map[string]float64 {
	t.Helper()
	resp, err := http.Get(e.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range families["http_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		got[labels["pod_template_hash"]+" "+labels["code"]] = m.GetCounter().GetValue()
	}
	return got
}

// The exporter counts RequestsPerSecond per hash from its clock, the set fraction as 500s; a rate change
// keeps the counts so far; a hash that never failed has no code="500" series.
func TestExporterCounts(t *testing.T) {
	e := NewExporter(t)
	start := time.Unix(1_700_000_000, 0)
	now := start
	e.now = func() time.Time { return now }
	e.SetErrorRate("good", 0)
	e.SetErrorRate("bad", 0.4)
	now = start.Add(10 * time.Second)
	e.SetErrorRate("bad", 0)
	now = start.Add(20 * time.Second)
	cases := []struct {
		name, series string
		want         float64
		present      bool
	}{
		{"good 200", "good 200", 2000, true},
		{"good has no 500 series", "good 500", 0, false},
		{"bad 200: 600 then 1000", "bad 200", 1600, true},
		{"bad 500: 400, then none", "bad 500", 400, true},
	}
	got := scrape(t, e)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := got[tc.series]
			if ok != tc.present || v != tc.want {
				t.Errorf("%s = %v (present %v), want %v (present %v); all: %v", tc.series, v, ok, tc.want, tc.present, got)
			}
		})
	}
}
