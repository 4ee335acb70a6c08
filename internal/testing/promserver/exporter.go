package promserver

import (
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RequestsPerSecond is the traffic an Exporter counts for each pod-template-hash, in requests per second.
const RequestsPerSecond = 100

// requestsDesc is the one metric an Exporter serves.
var requestsDesc = prometheus.NewDesc("http_requests_total", "HTTP requests served, by status code and the serving pod's pod-template-hash.",
	[]string{"code", "pod_template_hash"}, nil)

// Exporter is an HTTP server at /metrics with a counter http_requests_total{code, pod_template_hash}: each
// hash the test registered with SetErrorRate serves RequestsPerSecond requests a second, that fraction of
// them answered 500 and the others 200, counted from the clock at each scrape (no goroutine, no sleep).
// Like an application that does not pre-initialise its label values, the code="500" series of a hash
// appears only once it has counted an error: a query dividing 5xx by all requests is empty for a hash that
// never failed unless it is written `(sum(rate(…5xx…)) or vector(0)) / sum(rate(…))`.
type Exporter struct {
	srv *httptest.Server
	// now is the clock; a test seam, time.Now by default.
	now func() time.Time

	mu     sync.Mutex
	hashes map[string]*traffic
}

// traffic is one hash's counts: what was counted up to since, and the error rate from since on.
type traffic struct {
	ok, errors float64
	rate       float64
	since      time.Time
}

// NewExporter starts an Exporter on 127.0.0.1 with no hash yet; it stops when t ends.
func NewExporter(t testing.TB) *Exporter {
	e := &Exporter{now: time.Now, hashes: map[string]*traffic{}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	e.srv = httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(e.srv.Close)
	return e
}

// Target is the host:port to scrape (Config.Targets, Start).
func (e *Exporter) Target() string {
	return strings.TrimPrefix(e.srv.URL, "http://")
}

// URL is the exporter's base URL; its metrics are at URL + "/metrics".
func (e *Exporter) URL() string {
	return e.srv.URL
}

// SetErrorRate makes hash serve traffic from now on with rate (0–1, clamped) of its requests answered 500;
// the counts so far are kept.
func (e *Exporter) SetErrorRate(hash string, rate float64) {
	rate = min(max(rate, 0), 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	tr, ok := e.hashes[hash]
	if !ok {
		e.hashes[hash] = &traffic{rate: rate, since: now}
		return
	}
	tr.ok, tr.errors = tr.countsAt(now)
	tr.rate, tr.since = rate, now
}

// ErrorRateMetric is an analysis template's metrics (EX-6, issue 47's): 3 measurements 2 s apart of the
// Exporter's 5xx share for the new pods' pod-template-hash, success below 5%. The numerator falls back to 0
// for a version that never answered a 5xx (its code="500" series does not exist).
const ErrorRateMetric = `
- name: error-rate
  interval: 2s
  count: 3
  successCondition: result < 0.05
  provider:
    prometheus:
      query: |
        (sum(rate(http_requests_total{code="500",pod_template_hash="{{ .NewPodTemplateHash }}"}[5s])) or vector(0))
        / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[5s]))
`

// ErrorsOnlyMetric is ErrorRateMetric without the fallback and the denominator: for a version that never
// failed its result is empty, which is Inconclusive.
const ErrorsOnlyMetric = `
- name: error-rate
  interval: 2s
  count: 3
  successCondition: result < 0.05
  provider:
    prometheus:
      query: sum(rate(http_requests_total{code="500",pod_template_hash="{{ .NewPodTemplateHash }}"}[5s]))
`

// Forget stops serving hash's series (as if its pods were gone): from the next scrape Prometheus marks them
// stale, and an instant query over them is empty.
func (e *Exporter) Forget(hash string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.hashes, hash)
}

// countsAt returns the requests answered 200 and 500 up to now.
func (tr *traffic) countsAt(now time.Time) (ok, errors float64) {
	n := max(now.Sub(tr.since).Seconds(), 0) * RequestsPerSecond
	return tr.ok + n*(1-tr.rate), tr.errors + n*tr.rate
}

// Describe is prometheus.Collector's.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
}

// Collect is prometheus.Collector's: each hash's counters at the time of the scrape.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	hashes := make([]string, 0, len(e.hashes))
	for h := range e.hashes {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		ok, errors := e.hashes[h].countsAt(now)
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, ok, "200", h)
		if errors > 0 {
			ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, errors, "500", h)
		}
	}
}
