package deployment

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// fakeAnalyzer stands in for internal/analysis's Source: one template, "error-rate", of one metric measured
// count times interval apart, and measurements that answer what the test set.
type fakeAnalyzer struct {
	metrics []analysis.Metric

	mu       sync.Mutex
	answer   analysis.Measurement
	measured int
}

func newFakeAnalyzer(t *testing.T, metricYAML string) *fakeAnalyzer {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "error-rate", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: metricYAML}}
	metrics, err := analysis.ParseTemplate(cm)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeAnalyzer{metrics: metrics}
}

func (a *fakeAnalyzer) Templates(_ context.Context, _ string, names []string, _ []analysis.Arg) ([]analysis.Metric, error) {
	if len(names) != 1 || names[0] != "error-rate" {
		return nil, &analysis.TemplateError{Template: strings.Join(names, ","), Fault: "not found"}
	}
	return a.metrics, nil
}

func (a *fakeAnalyzer) Measure(context.Context, analysis.Metric, analysis.QueryArgs, []*v1.Pod) analysis.Measurement {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.measured++
	return a.answer
}

func (a *fakeAnalyzer) set(phase analysis.Phase, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answer = analysis.Measurement{Phase: phase, Value: value, Message: "result " + value + ": condition result < 0.05 is " + string(phase)}
}

func (a *fakeAnalyzer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.measured
}

const errorRateMetric = `
- name: error-rate
  interval: 2s
  count: 3
  successCondition: result < 0.05
  provider: {prometheus: {query: 'sum(rate(errors{pod_template_hash="{{ .NewPodTemplateHash }}"}[1m]))'}}
`

// analysisWorld is stepsWorld (the real syncs, EX-5's invariants checked after each) with the fake analyzer
// behind the controller's measurements.
type analysisWorld struct {
	*stepsWorld
	a *fakeAnalyzer
	// reasons are the Progressing reasons seen while the world ran, in order, repeats collapsed.
	reasons []string
}

func newAnalysisWorld(t *testing.T, steps string) *analysisWorld {
	w := &analysisWorld{stepsWorld: newStepsWorld(t, 10, intstr.FromInt32(1), intstr.FromInt32(0), steps), a: newFakeAnalyzer(t, errorRateMetric)}
	w.f.c.analyses = newMeasurements(w.a, func(cache.ObjectName) {})
	w.f.c.analyses.setContext(w.f.Ctx)
	w.setFencepostPods()
	w.checkVerdictWrites()
	return w
}

// checkVerdictWrites fails the test at any Deployment write whose analysis record has a run paused
// (Inconclusive or Error) at the step the rollout is at, or a paused background run, while its Progressing
// condition says otherwise:
// the verdict and the condition it holds the rollout with go in one write.
func (w *analysisWorld) checkVerdictWrites() {
	w.f.Client.PrependReactor("update", "deployments", func(action core.Action) (bool, runtime.Object, error) {
		d, ok := action.(core.UpdateAction).GetObject().(*appsv1.Deployment)
		if !ok {
			return false, nil, nil
		}
		st, ok := rolloutstate.StepStateOf(d)
		if !ok {
			return false, nil, nil
		}
		rec := rolloutstate.AnalysisRecordOf(d, st.Revision)
		run := rec.Run(st.Step)
		if bg := rec.Run(rolloutstate.BackgroundRun); bg.Paused() {
			run = bg
		}
		if !run.Paused() {
			return false, nil, nil
		}
		if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused {
			w.f.T.Errorf("a write records the run %s with Progressing %+v, want %s in the same write", run.Phase, c, rolloutstate.RolloutAnalysisPaused)
		}
		return false, nil, nil
	})
}

// idle waits until no measurement is in flight.
func (w *analysisWorld) idle() {
	w.f.T.Helper()
	m := w.f.c.analyses
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		m.mu.Lock()
		busy := false
		for _, r := range m.runs {
			busy = busy || len(r.inFlight) > 0
		}
		m.mu.Unlock()
		if !busy {
			return
		}
	}
	w.fatalf("measurements still in flight after 5 s")
}

// run lets seconds pass, a second at a time, settling and taking the measurements due after each.
func (w *analysisWorld) run(seconds int) {
	for range seconds {
		w.settle()
		w.idle()
		w.settle()
		w.note()
		w.f.Clock.Step(time.Second)
	}
}

func (w *analysisWorld) note() {
	if c := rolloutstate.Condition(&w.f.deployment().Status, appsv1.DeploymentProgressing); c != nil {
		if n := len(w.reasons); n == 0 || w.reasons[n-1] != c.Reason {
			w.reasons = append(w.reasons, c.Reason)
		}
	}
}

// run0 returns the recorded run of the analysis at step index 1 of revision rev.
func (w *analysisWorld) run1(rev int64) *rolloutstate.AnalysisRun {
	rec := rolloutstate.AnalysisRecordOf(w.f.deployment(), rev)
	return rec.Run(1)
}

const analysisSteps = "- setWeight: 30\n- analysis: {templates: [error-rate]}\n- setWeight: 60\n"

// EX-6: an analysis step holds the rollout at the setWeight before it (Progressing RolloutAnalysisRunning, no
// progress deadline) while its metric is measured count times, interval apart, off the workers; three
// successes record the run Successful (a Normal event) and the rollout goes on to completion.
func TestAnalysisStepSucceeds(t *testing.T) {
	w := newAnalysisWorld(t, analysisSteps)
	w.a.set(analysis.PhaseSuccessful, "0.001")
	w.setImage(false)
	const rev = 2 // revision 1 is the first rollout (newStepsWorld)
	w.run(3)
	if n := w.newReplicas(w.f.deployment()); n != 3 || w.a.count() != 2 {
		w.fatalf("3 s into the analysis: new ReplicaSet at %d pods, %d measurements; want 3 pods, 2 measurements (t=0 s, 2 s)", n, w.a.count())
	}
	w.run(3)
	run := w.run1(rev)
	if run == nil || run.Phase != rolloutstate.AnalysisSuccessful || run.Metric("error-rate").Successful != 3 || w.a.count() != 3 {
		w.fatalf("after 6 s: run %+v, %d measurements; want Successful with 3", run, w.a.count())
	}
	w.run(2)
	if d := w.f.deployment(); !rolloutstate.Complete(d, &d.Status) {
		w.fatalf("the rollout did not complete after the analysis: %+v", d.Status)
	}
	if !contains(w.reasons, rolloutstate.RolloutAnalysisRunning) {
		t.Errorf("Progressing reasons %v, want RolloutAnalysisRunning while the analysis held", w.reasons)
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisSuccessful+" Revision 2: rollout step 2 (analysis error-rate) succeeded: error-rate 3/3 successful") {
		t.Errorf("events:\n%s\nwant AnalysisSuccessful", ev)
	}
}

// EX-6: a failed measurement past failureLimit (0) decides the run Failed at once, and the rollout is aborted
// as `kubedeploy rollout abort` does: back to the previous revision, failed-revision recorded, the new
// ReplicaSet never past the step's 3 pods; the event names the metric, its value and the condition.
func TestAnalysisStepFailsAndAborts(t *testing.T) {
	w := newAnalysisWorld(t, analysisSteps)
	w.a.set(analysis.PhaseFailed, "0.4")
	w.setImage(false)
	const rev = 2 // revision 1 is the first rollout (newStepsWorld)
	w.run(4)
	d := w.f.deployment()
	if run := w.run1(rev); run == nil || run.Phase != rolloutstate.AnalysisFailed || w.a.count() != 1 {
		w.fatalf("run %+v, %d measurements; want Failed after 1 (%s)", run, w.a.count(), d.Annotations)
	}
	if d.Annotations[rolloutstate.FailedRevisionAnnotation] != "2" || image(d.Spec.Template) != "nginx:v0" {
		w.fatalf("not rolled back: failed-revision %q, image %s", d.Annotations[rolloutstate.FailedRevisionAnnotation], image(d.Spec.Template))
	}
	ev := strings.Join(w.f.Events(), "\n")
	for _, want := range []string{
		AnalysisFailed + ` Revision 2: rollout step 2 (analysis error-rate) is Failed on metric "error-rate": result 0.4: condition result < 0.05 is Failed; aborting the rollout`,
		RolloutAborted + " Aborted the rollout of revision 2 as its analysis failed, rolling back to revision 1",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("events:\n%s\nwant %q", ev, want)
		}
	}
}

// EX-6: Inconclusive past inconclusiveLimit (0) pauses the rollout for a human (RolloutAnalysisPaused, a Warning
// event), measures no more, and a promote of the step goes on; never a success on no data.
func TestAnalysisStepInconclusivePausesUntilPromoted(t *testing.T) {
	w := newAnalysisWorld(t, analysisSteps)
	w.a.set(analysis.PhaseInconclusive, "")
	w.setImage(false)
	const rev = 2 // revision 1 is the first rollout (newStepsWorld)
	w.run(8)
	d := w.f.deployment()
	if run := w.run1(rev); run == nil || run.Phase != rolloutstate.AnalysisInconclusive || w.a.count() != 1 {
		w.fatalf("run %+v, %d measurements; want Inconclusive after 1, then none", run, w.a.count())
	}
	if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused ||
		!strings.Contains(c.Message, "kubedeploy rollout promote deploy/nginx") {
		w.fatalf("Progressing %+v, want RolloutAnalysisPaused naming promote", c)
	}
	if n := w.newReplicas(d); n != 3 {
		w.fatalf("new ReplicaSet at %d pods while paused, want 3", n)
	}
	w.annotate(rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(rev, 1, false))
	w.run(2)
	if d := w.f.deployment(); !rolloutstate.Complete(d, &d.Status) {
		w.fatalf("not complete after the promote: %+v", d.Status)
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisPaused+` Revision 2: rollout step 2 (analysis error-rate) is Inconclusive on metric "error-rate"`) {
		t.Errorf("events:\n%s\nwant AnalysisPaused", ev)
	}
}

// EX-6: errors are taken again each interval and never count as success; past consecutiveErrorLimit (4) in a
// row the run is Error and the rollout waits for a human.
func TestAnalysisStepErrorsPause(t *testing.T) {
	w := newAnalysisWorld(t, analysisSteps)
	w.a.set(analysis.PhaseError, "")
	w.setImage(false)
	const rev = 2 // revision 1 is the first rollout (newStepsWorld)
	w.run(12)
	run := w.run1(rev)
	if run == nil || run.Phase != rolloutstate.AnalysisError || run.Metric("error-rate").Error != 5 || w.a.count() != 5 {
		w.fatalf("run %+v, %d measurements; want Error after 5", run, w.a.count())
	}
	if c := rolloutstate.Condition(&w.f.deployment().Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused {
		w.fatalf("Progressing %+v, want RolloutAnalysisPaused", c)
	}
}

// EX-6: a step whose template cannot be read holds the rollout with a Warning event and measures nothing.
func TestAnalysisStepMissingTemplateHolds(t *testing.T) {
	w := newAnalysisWorld(t, "- setWeight: 30\n- analysis: {templates: [latency]}\n")
	w.setImage(false)
	w.run(4)
	d := w.f.deployment()
	if w.a.count() != 0 || w.newReplicas(d) != 3 {
		w.fatalf("%d measurements, new ReplicaSet at %d; want none, 3", w.a.count(), w.newReplicas(d))
	}
	if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisRunning || !strings.Contains(c.Message, "its templates cannot be used") {
		w.fatalf("Progressing %+v", c)
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisTemplateInvalid) {
		t.Errorf("events:\n%s\nwant AnalysisTemplateInvalid", ev)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
