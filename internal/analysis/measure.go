package analysis

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Phase is the outcome of one measurement (EX-6), with Argo Rollouts' names.
type Phase string

const (
	// PhaseSuccessful: the conditions say the result is good.
	PhaseSuccessful Phase = "Successful"
	// PhaseFailed: the conditions say the result is bad; past failureLimit the analysis fails and the rollout
	// aborts (EX-5).
	PhaseFailed Phase = "Failed"
	// PhaseInconclusive: no verdict: neither condition is true, or there is no usable value (an empty result,
	// no pods, more than one series, NaN). Never counted as success.
	PhaseInconclusive Phase = "Inconclusive"
	// PhaseError: the measurement could not be taken or judged: the query failed, timed out or could not be
	// sent, the address is not allowed, a condition did not evaluate to a bool. Never counted as success
	// (argo-rollouts#4479: an AnalysisRun Successful although every measurement errored).
	PhaseError Phase = "Error"
)

// maxMessageLength bounds Measurement.Message, in bytes: it goes into events and the state annotation.
const maxMessageLength = 1024

// maxQueryInMessage bounds the rendered query quoted in a Message, in bytes (Measurement.Query has it all).
const maxQueryInMessage = 300

// Measurement is the outcome of one measurement of one metric (EX-6).
type Measurement struct {
	// Phase is Successful, Failed, Inconclusive or Error.
	Phase Phase `json:"phase"`
	// Value is the result as events and `rollout watch` show it: "0.4", "NaN",
	// "ready=3 notReady=0 restarts=0 total=3"; empty when there was none (an error, an empty result).
	Value string `json:"value,omitempty"`
	// Number is a Prometheus result's value (for kubedeploy_analysis_last_value); nil for the pods provider
	// and when there was no single value.
	Number *float64 `json:"number,omitempty"`
	// Message says why, in one line of at most 1 KiB: the value and the condition that decided, or the
	// cause of an Inconclusive or Error, with the rendered query for the prometheus provider.
	Message string `json:"message,omitempty"`
	// Query is the rendered PromQL (prometheus provider only).
	Query string `json:"query,omitempty"`
}

// Measurer takes measurements (EX-6): one Measure call renders a metric's query, queries Prometheus or counts
// the pods, and classifies the result. It caches compiled conditions; safe for concurrent use.
type Measurer struct {
	prometheus Prometheus
	mu         sync.Mutex
	conditions map[[2]string]*Conditions
}

// maxCachedConditions bounds the Measurer's cache of compiled conditions (entries); it is emptied when full.
const maxCachedConditions = 512

// NewMeasurer returns a Measurer that queries p (whose Validate the caller has checked).
func NewMeasurer(p Prometheus) *Measurer {
	return &Measurer{prometheus: p, conditions: map[[2]string]*Conditions{}}
}

// Measure takes one measurement of metric: the prometheus provider renders the query with args and runs it
// as an instant query; the pods provider counts pods (the new ReplicaSet's, from the caller's cache). It never
// fails: what goes wrong is an Error or Inconclusive Measurement saying why, never Successful (a metric that
// could not be measured is not a success: argo-rollouts#1329, #4479). It returns within the query's timeout
// (Settings.Timeout, Prometheus.Timeout or DefaultQueryTimeout) or when ctx ends; a measurement cut short by
// ctx is an Error the caller should not record when it is shutting down (ctx.Err() != nil).
func (m *Measurer) Measure(ctx context.Context, metric Metric, args QueryArgs, pods []*corev1.Pod) Measurement {
	var ms Measurement
	conds, err := m.conditionsOf(metric)
	p := metric.Provider
	switch {
	case err != nil:
		ms = Measurement{Phase: PhaseError, Message: oneLine(err.Error())}
	case p.Pods != nil && p.Prometheus == nil:
		ms = measurePods(ctx, conds, pods)
	case p.Prometheus != nil && p.Pods == nil:
		ms = m.measurePrometheus(ctx, conds, metric, args)
	default:
		ms = Measurement{Phase: PhaseError, Message: "the metric has not exactly one provider (prometheus or pods)"}
	}
	ms.Message = truncate(ms.Message, maxMessageLength)
	klog.FromContext(ctx).V(4).Info("Analysis measurement", "template", metric.Template, "metric", metric.Name,
		"phase", ms.Phase, "value", ms.Value, "message", ms.Message)
	return ms
}

// conditionsOf returns metric's compiled conditions, from the cache when they were compiled before.
func (m *Measurer) conditionsOf(metric Metric) (*Conditions, error) {
	key := [2]string{metric.SuccessCondition, metric.FailureCondition}
	m.mu.Lock()
	c, ok := m.conditions[key]
	m.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := CompileConditions(metric.SuccessCondition, metric.FailureCondition)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if len(m.conditions) >= maxCachedConditions {
		clear(m.conditions)
	}
	m.conditions[key] = c
	m.mu.Unlock()
	return c, nil
}

// measurePods classifies the pods' counts; no pods is Inconclusive (no data), whatever the conditions say.
func measurePods(ctx context.Context, conds *Conditions, pods []*corev1.Pod) Measurement {
	r := PodsResultOf(pods)
	ms := Measurement{Value: r.String()}
	if r.Total == 0 {
		ms.Phase = PhaseInconclusive
		ms.Message = "no pods of the new ReplicaSet to measure (no data)"
		if deleting := len(pods) - nilPods(pods); deleting > 0 {
			ms.Message = fmt.Sprintf("no pods of the new ReplicaSet to measure: %d being deleted (no data)", deleting)
		}
		return ms
	}
	phase, why := conds.Evaluate(ctx, r.celValue())
	ms.Phase, ms.Message = phase, "result "+r.String()+": "+why
	return ms
}

func nilPods(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p == nil {
			n++
		}
	}
	return n
}

// measurePrometheus renders metric's query, runs it and classifies its value.
func (m *Measurer) measurePrometheus(ctx context.Context, conds *Conditions, metric Metric, args QueryArgs) Measurement {
	prov := metric.Provider.Prometheus
	query, err := RenderQuery(prov.Query, args)
	if err != nil {
		return Measurement{Phase: PhaseError, Message: err.Error()}
	}
	ms := Measurement{Query: query}
	quoted := "; query: " + truncate(strings.Join(strings.Fields(query), " "), maxQueryInMessage)
	address, err := m.prometheus.Address(prov.Address)
	if err != nil {
		ms.Phase, ms.Message = PhaseError, err.Error()+quoted
		return ms
	}
	value, out := m.prometheus.instant(ctx, address, m.prometheus.timeout(metric.Settings().Timeout), query)
	if out != nil {
		ms.Phase, ms.Value, ms.Message = out.phase, out.value, out.message+quoted
		return ms
	}
	phase, why := conds.Evaluate(ctx, value)
	ms.Phase, ms.Value, ms.Number = phase, formatValue(value), &value
	ms.Message = "result " + ms.Value + ": " + why + quoted
	return ms
}

// truncate returns s cut to at most n bytes, ending in "…" when cut (on a UTF-8 boundary).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
