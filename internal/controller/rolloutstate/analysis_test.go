package rolloutstate

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// record returns a MetricRecord after the measurements phases, one per second from t0.
func record(phases ...MeasurementPhase) MetricRecord {
	r := MetricRecord{Name: "m"}
	for i, p := range phases {
		r.Record(Measurement{Phase: p, Value: "1", At: metav1.NewTime(t0.Add(time.Duration(i) * time.Second))})
	}
	return r
}

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

const (
	ok  = MeasurementSuccessful
	bad = MeasurementFailed
	inc = MeasurementInconclusive
	er  = MeasurementError
)

// EX-6: a metric's phase from its measurements and limits: failures past failureLimit fail it, inconclusive
// past inconclusiveLimit or errors in a row past consecutiveErrorLimit wait for a human, and it succeeds only
// with its count taken and at least one success: never on missing, empty or errored data (argo-rollouts#4479).
func TestMetricPhase(t *testing.T) {
	three := MetricLimits{Count: 3, ConsecutiveErrorLimit: 4}
	for _, tc := range []struct {
		name   string
		limits MetricLimits
		rec    MetricRecord
		want   AnalysisPhase
	}{
		{"nothing measured", three, record(), AnalysisRunning},
		{"two of three", three, record(ok, ok), AnalysisRunning},
		{"three successes", three, record(ok, ok, ok), AnalysisSuccessful},
		{"one failure, failureLimit 0", three, record(ok, bad), AnalysisFailed},
		{"one failure within failureLimit 1", MetricLimits{Count: 3, FailureLimit: 1, ConsecutiveErrorLimit: 4}, record(ok, bad, ok), AnalysisSuccessful},
		{"two failures past failureLimit 1", MetricLimits{Count: 3, FailureLimit: 1, ConsecutiveErrorLimit: 4}, record(bad, ok, bad), AnalysisFailed},
		{"inconclusive, limit 0", three, record(ok, inc), AnalysisInconclusive},
		{"every measurement inconclusive within the limit", MetricLimits{Count: 2, InconclusiveLimit: 2}, record(inc, inc), AnalysisInconclusive},
		{"count taken, the only success missing", MetricLimits{Count: 1, FailureLimit: 1}, record(bad), AnalysisInconclusive},
		{"errors are retried, not counted", three, record(er, ok, er, ok, ok), AnalysisSuccessful},
		{"errors in a row up to the limit", three, record(er, er, er, er), AnalysisRunning},
		{"errors in a row past the limit", three, record(er, er, er, er, er), AnalysisError},
		{"a value ends the errors in a row", three, record(er, er, er, er, ok, er, er), AnalysisRunning},
		{"every measurement errored", MetricLimits{Count: 1}, record(er), AnalysisError},
		{"failure outranks errors", MetricLimits{Count: 3}, record(bad, er, er), AnalysisFailed},
		{"count 0 means 1", MetricLimits{}, record(ok), AnalysisSuccessful},
	} {
		if got := tc.rec.Phase(tc.limits); got != tc.want {
			t.Errorf("%s: %+v → %s, want %s", tc.name, tc.rec, got, tc.want)
		}
	}
}

// EX-6: Record counts by phase, keeps the errors in a row, bounds the value and keeps whole seconds; an unknown
// phase counts as an Error, never as a success.
func TestMetricRecord(t *testing.T) {
	r := record(er, er, ok, er)
	if r.Successful != 1 || r.Error != 3 || r.ConsecutiveError != 1 || r.Measured() != 1 {
		t.Errorf("record = %+v", r)
	}
	r.Record(Measurement{Phase: "Unknown", Value: strings.Repeat("9", 100), At: metav1.NewTime(t0.Add(1500 * time.Millisecond))})
	if r.Error != 4 || r.Last.Phase != MeasurementError || len(r.Last.Value) != MaxMeasurementValue || !strings.HasSuffix(r.Last.Value, "…") {
		t.Errorf("unknown phase, long value: %+v, last %+v (%d bytes)", r, r.Last, len(r.Last.Value))
	}
	if !r.Last.At.Equal(&metav1.Time{Time: t0.Add(time.Second)}) {
		t.Errorf("at %v, want whole seconds", r.Last.At)
	}
}

// EX-6: the first measurement is due initialDelay after the run started, each next one interval after the last.
func TestMetricNextAt(t *testing.T) {
	l := MetricLimits{Count: 3, Interval: 30 * time.Second, InitialDelay: 10 * time.Second}
	if got := record().NextAt(t0, l); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("first at %v, want initialDelay after the start", got)
	}
	if got := record(ok, ok).NextAt(t0, l); !got.Equal(t0.Add(31 * time.Second)) {
		t.Errorf("next at %v, want interval after the last (t0+1s)", got)
	}
}

// EX-6: a run fails when any metric failed (naming it), waits for a human when one is inconclusive or erring,
// and succeeds only when every metric of the templates succeeded; a metric not measured yet keeps it running.
func TestAnalysisRunPhase(t *testing.T) {
	limits := map[string]MetricLimits{"a": {Count: 1, ConsecutiveErrorLimit: 0}, "b": {Count: 1}}
	order := []string{"a", "b"}
	run := func(recs ...MetricRecord) AnalysisRun { return AnalysisRun{Metrics: recs} }
	named := func(name string, r MetricRecord) MetricRecord { r.Name = name; return r }
	for _, tc := range []struct {
		name   string
		run    AnalysisRun
		order  []string
		want   AnalysisPhase
		metric string
	}{
		{"no measurements", run(), order, AnalysisRunning, ""},
		{"b not measured yet", run(named("a", record(ok))), order, AnalysisRunning, ""},
		{"both successful", run(named("b", record(ok)), named("a", record(ok))), order, AnalysisSuccessful, ""},
		{"b failed", run(named("a", record(ok)), named("b", record(bad))), order, AnalysisFailed, "b"},
		{"failure outranks a human wait", run(named("a", record(er)), named("b", record(bad))), order, AnalysisFailed, "b"},
		{"a erring", run(named("a", record(er)), named("b", record(ok))), order, AnalysisError, "a"},
		{"b inconclusive", run(named("a", record(ok)), named("b", record(inc))), order, AnalysisInconclusive, "b"},
		{"a record of a metric no longer in the templates is ignored", run(named("a", record(ok)), named("b", record(ok)), named("c", record(bad))), order, AnalysisSuccessful, ""},
		{"no metrics never succeeds", run(), nil, AnalysisRunning, ""},
	} {
		if got, metric := tc.run.Evaluate(limits, tc.order); got != tc.want || metric != tc.metric {
			t.Errorf("%s: %s %q, want %s %q", tc.name, got, metric, tc.want, tc.metric)
		}
	}
}

// EX-6: the record round-trips through the annotation, is for one revision (another's, or a value that does not
// parse, starts over), and Start keeps a run already started.
func TestAnalysisRecordOf(t *testing.T) {
	rec := AnalysisRecord{Revision: 4}
	run := rec.Start(2, t0.Add(300*time.Millisecond))
	run.Metric("error-rate").Record(Measurement{Phase: bad, Value: "0.4", At: metav1.NewTime(t0.Add(2 * time.Second))})
	if again := rec.Start(2, t0.Add(time.Hour)); !again.Since.Equal(&metav1.Time{Time: t0.Add(time.Second)}) || len(rec.Runs) != 1 {
		t.Errorf("Start again: %+v, runs %d; want the run started at t0+1s (rounded up), once", again, len(rec.Runs))
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RolloutAnalysisStateAnnotation: rec.Encode()}}}
	got := AnalysisRecordOf(d, 4)
	if r := got.Run(2); r == nil || r.Metric("error-rate").Failed != 1 || r.Metric("error-rate").Last.Value != "0.4" {
		t.Errorf("round trip: %+v", got)
	}
	if got.Run(BackgroundRun) != nil {
		t.Error("a background run that never started")
	}
	for name, v := range map[string]string{"other revision": rec.Encode(), "garbage": "{", "missing": ""} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if v != "" {
			d.Annotations[RolloutAnalysisStateAnnotation] = v
		}
		if got := AnalysisRecordOf(d, 5); got.Revision != 5 || len(got.Runs) != 0 {
			t.Errorf("%s: %+v, want an empty record for revision 5", name, got)
		}
	}
}

// EX-6: an analysis step's description and args.
func TestStepAnalysisString(t *testing.T) {
	steps, err := ParseSteps("- setWeight: 30\n- analysis: {templates: [error-rate, latency], args: [{name: svc, value: web}]}")
	if err != nil || len(steps) != 2 {
		t.Fatalf("ParseSteps = %v, %v", steps, err)
	}
	a := steps[1].Analysis
	if got := steps[1].String(); got != "analysis error-rate, latency" {
		t.Errorf("String = %q", got)
	}
	if got := a.ArgsMap(); got["svc"] != "web" || len(got) != 1 {
		t.Errorf("ArgsMap = %v", got)
	}
}

// EX-6 in EX-5's steps: an analysis step holds at the setWeight before it until its run is recorded
// Successful; a run still going, or one recorded Failed or waiting for a human, keeps holding; a promote of the
// step goes on.
func TestAdvanceStepsAnalysis(t *testing.T) {
	w := newStepsWorld(t, "- setWeight: 30\n")
	w.steps = append(w.steps, Step{Analysis: &StepAnalysis{Templates: []string{"error-rate"}}}, Step{SetWeight: new(int32(60))})
	w.at(3, 3)
	p := w.advance(t0)
	if p.State.Step != 1 || p.Wait != StepWaitAnalysis || p.Partition.Pods != 3 {
		t.Fatalf("30%% reached: %+v", p)
	}
	for _, phase := range []AnalysisPhase{"", AnalysisFailed, AnalysisInconclusive, AnalysisError} {
		rec := AnalysisRecord{Revision: 2}
		rec.Start(1, t0).Phase = phase
		w.d.Annotations[RolloutAnalysisStateAnnotation] = rec.Encode()
		if p = w.advance(t0.Add(time.Minute)); p.State.Step != 1 || p.Wait != StepWaitAnalysis || p.Changed {
			t.Errorf("run %q: %+v, want held at the analysis", phase, p)
		}
	}
	other := AnalysisRecord{Revision: 1}
	other.Start(1, t0).Phase = AnalysisSuccessful
	w.d.Annotations[RolloutAnalysisStateAnnotation] = other.Encode()
	if p = w.advance(t0.Add(time.Minute)); p.State.Step != 1 {
		t.Errorf("another revision's successful run: %+v, want held", p)
	}
	rec := AnalysisRecord{Revision: 2}
	rec.Start(1, t0).Phase = AnalysisSuccessful
	w.d.Annotations[RolloutAnalysisStateAnnotation] = rec.Encode()
	if p = w.advance(t0.Add(time.Minute)); p.State.Step != 2 || p.Wait != StepWaitPods || p.Partition.Pods != 6 {
		t.Errorf("run successful: %+v, want step 3 (60%%)", p)
	}
	if got := w.steps[1].WaitsFor(); got != StepWaitAnalysis {
		t.Errorf("WaitsFor = %q", got)
	}
	w2 := newStepsWorld(t, "- setWeight: 30\n")
	w2.steps = append(w2.steps, Step{Analysis: &StepAnalysis{Templates: []string{"error-rate"}}})
	w2.at(3, 3)
	w2.d.Annotations[RolloutPromoteAnnotation] = PromoteValue(2, 1, false)
	if p = w2.advance(t0); p.State.Step != 2 || p.Partition.Set {
		t.Errorf("analysis promoted: %+v, want every step done", p)
	}
}
