package analysis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// EX-6's pods provider through Measure: no pods is Inconclusive even where a condition would hold (Argo
// counted a metric with no data as success: argo-rollouts#1329, #4479); a metric kubedeploy could not judge is
// Error, never Successful.
func TestMeasurePods(t *testing.T) {
	healthy := "result.restarts == 0 && result.notReady == 0"
	pods := func(m Metric) Metric { m.Name, m.Provider = "pods", Provider{Pods: &PodsProvider{}}; return m }
	cases := []struct {
		name   string
		metric Metric
		pods   []*corev1.Pod
		want   Phase
		value  string
		why    string
	}{
		{"all ready", pods(Metric{SuccessCondition: healthy}), []*corev1.Pod{pod(true, 0, 0), pod(true, 0, 0)}, PhaseSuccessful,
			"ready=2 notReady=0 restarts=0 total=2", "result ready=2 notReady=0 restarts=0 total=2: successCondition"},
		{"a restart", pods(Metric{SuccessCondition: healthy}), []*corev1.Pod{pod(true, 1, 0), pod(true, 0, 0)}, PhaseFailed,
			"ready=2 notReady=0 restarts=1 total=2", "is false"},
		{"no pods", pods(Metric{SuccessCondition: healthy}), nil, PhaseInconclusive, "ready=0 notReady=0 restarts=0 total=0", "no pods of the new ReplicaSet"},
		{"no pods, failure condition only", pods(Metric{FailureCondition: "result.restarts > 0"}), nil, PhaseInconclusive, "ready=0 notReady=0 restarts=0 total=0", "(no data)"},
		{"only pods being deleted", pods(Metric{SuccessCondition: healthy}), []*corev1.Pod{deletingPod()}, PhaseInconclusive, "ready=0 notReady=0 restarts=0 total=0", "1 being deleted"},
		{"no condition", pods(Metric{}), []*corev1.Pod{pod(true, 0, 0)}, PhaseError, "", "no successCondition or failureCondition"},
		{"no provider", Metric{Name: "x", SuccessCondition: "true"}, []*corev1.Pod{pod(true, 0, 0)}, PhaseError, "", "not exactly one provider"},
		{"two providers", Metric{Name: "x", SuccessCondition: "true", Provider: Provider{Pods: &PodsProvider{}, Prometheus: &PrometheusProvider{Query: "up"}}}, nil, PhaseError, "", "not exactly one provider"},
		{"bad key", pods(Metric{SuccessCondition: "result.restart == 0"}), []*corev1.Pod{pod(true, 0, 0)}, PhaseError, "ready=1 notReady=0 restarts=0 total=1", "no such key: restart"},
	}
	m := NewMeasurer(Prometheus{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := m.Measure(context.Background(), tc.metric, QueryArgs{}, tc.pods)
			if got.Phase != tc.want || got.Value != tc.value || !strings.Contains(got.Message, tc.why) || got.Number != nil || got.Query != "" {
				t.Errorf("Measure = %+v, want %s, value %q, message with %q", got, tc.want, tc.value, tc.why)
			}
		})
	}
}

func deletingPod() *corev1.Pod {
	p := pod(true, 0, 0)
	p.DeletionTimestamp = p.CreationTimestamp.DeepCopy()
	return p
}

// A Measurer with no --prometheus-url measures nothing: Error naming the flag.
func TestMeasureWithoutPrometheus(t *testing.T) {
	got := NewMeasurer(Prometheus{}).Measure(context.Background(), promMetric("up", "", ""), QueryArgs{}, nil)
	if got.Phase != PhaseError || !strings.Contains(got.Message, "--prometheus-url") || got.Query != "up" {
		t.Errorf("Measure = %+v, want Error naming --prometheus-url", got)
	}
}

// Messages stay one bounded line whatever the query: events and the state annotation carry them.
func TestMeasureMessageBounded(t *testing.T) {
	query := "sum(up)\n" + strings.Repeat("+ sum(up{job=\"x\"})\n", 200)
	got := NewMeasurer(Prometheus{}).Measure(context.Background(), promMetric(query, "", ""), QueryArgs{}, nil)
	if len(got.Message) > maxMessageLength || strings.Contains(got.Message, "\n") || !strings.HasSuffix(got.Message, "…") {
		t.Errorf("Message of %d bytes %q, want one line of at most %d bytes, cut with …", len(got.Message), got.Message, maxMessageLength)
	}
	if got.Query != query {
		t.Errorf("Query was cut: %d bytes, want %d", len(got.Query), len(query))
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		name, s string
		n       int
		want    string
	}{
		{"short", "abc", 5, "abc"},
		{"cut", "abcdefgh", 5, "ab…"},
		{"multibyte boundary", "ééééé", 6, "é…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := truncate(tc.s, tc.n); got != tc.want {
				t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}

// One Measurer serves the controller's workers at once: concurrent measurements with shared and distinct
// conditions each get their own verdict (run with -race).
func TestMeasurerConcurrent(t *testing.T) {
	m := NewMeasurer(Prometheus{})
	ready := []*corev1.Pod{pod(true, 0, 0), pod(true, 0, 0)}
	errs := make(chan string, 64)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				limit := (w*50 + i) % 4
				metric := Metric{Name: "p", SuccessCondition: fmt.Sprintf("result.ready > %d", limit), Provider: Provider{Pods: &PodsProvider{}}}
				want := PhaseFailed
				if limit < 2 {
					want = PhaseSuccessful
				}
				if got := m.Measure(context.Background(), metric, QueryArgs{}, ready); got.Phase != want {
					errs <- fmt.Sprintf("limit %d: %s, want %s", limit, got.Phase, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
