package deployment

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// backgroundSteps pause long enough that only the background analysis can end the rollout's steps early.
const backgroundSteps = "- setWeight: 30\n- pause: {duration: 60s}\n- setWeight: 60\n"

// newBackgroundWorld is an analysis world whose Deployment runs the error-rate template in the background
// (kubedeploy.io/rollout-analysis) beside backgroundSteps.
func newBackgroundWorld(t *testing.T, steps string) *analysisWorld {
	w := newAnalysisWorld(t, steps)
	w.annotate(rolloutstate.RolloutAnalysisAnnotation, "error-rate")
	return w
}

// startBackground is newBackgroundWorld on steps whose measurements succeed, its new image set and 3 s run.
func startBackground(t *testing.T, steps string) *analysisWorld {
	w := newBackgroundWorld(t, steps)
	w.a.set(analysis.PhaseSuccessful, "0.001")
	w.setImage(false)
	w.run(3)
	return w
}

func (w *analysisWorld) background(rev int64) *rolloutstate.AnalysisRun {
	rec := rolloutstate.AnalysisRecordOf(w.f.deployment(), rev)
	return rec.Run(rolloutstate.BackgroundRun)
}

// EX-6: a background analysis that fails aborts the rollout at whatever step it is (here the 60 s pause), as
// `kubedeploy rollout abort` does, the new ReplicaSet never past the 3 pods of its step.
func TestBackgroundAnalysisFailsAndAborts(t *testing.T) {
	w := startBackground(t, backgroundSteps)
	const rev = 2
	if run := w.background(rev); run == nil || run.Phase != "" || run.Metric("error-rate").Successful != 2 {
		w.fatalf("background run %+v after 3 s, want running with 2 successes (t=0 s, 2 s)", run)
	}
	// In the 60 s pause the sync asks to be back for the next measurement (2 s apart), not at the pause's end.
	if res, err := w.f.sync(); err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 2*time.Second+200*time.Millisecond {
		w.fatalf("a sync in the pause: requeue after %s (%v), want within the measurements' 2 s interval", res.RequeueAfter, err)
	}
	w.a.set(analysis.PhaseFailed, "0.4")
	w.run(4)
	d := w.f.deployment()
	if run := w.background(rev); run != nil && run.Phase != rolloutstate.AnalysisFailed {
		w.fatalf("background run %+v, want Failed", run)
	}
	if d.Annotations[rolloutstate.FailedRevisionAnnotation] != "2" || image(d.Spec.Template) != "nginx:v0" {
		w.fatalf("not rolled back: failed-revision %q, image %s", d.Annotations[rolloutstate.FailedRevisionAnnotation], image(d.Spec.Template))
	}
	ev := strings.Join(w.f.Events(), "\n")
	for _, want := range []string{
		AnalysisFailed + ` Revision 2: the background analysis error-rate is Failed on metric "error-rate"`,
		RolloutAborted + " Aborted the rollout of revision 2 as its analysis failed",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("events:\n%s\nwant %q", ev, want)
		}
	}
}

// EX-6: a background analysis that ends Inconclusive holds the rollout where it is for a human, also past a
// pause that has ended (RolloutAnalysisPaused); a promote goes on without it (recorded promoted, nothing more
// measured) to completion.
func TestBackgroundAnalysisInconclusivePausesUntilPromoted(t *testing.T) {
	w := startBackground(t, "- setWeight: 30\n- pause: {duration: 5s}\n- setWeight: 60\n")
	const rev = 2
	w.a.set(analysis.PhaseInconclusive, "")
	w.run(10) // the pause ends at 5 s: the hold keeps step 2
	d := w.f.deployment()
	if run := w.background(rev); !run.Paused() || run.Phase != rolloutstate.AnalysisInconclusive {
		w.fatalf("background run %+v, want Inconclusive, paused", run)
	}
	if _, st := w.revision(); st.Step != 1 || w.newReplicas(d) != 3 {
		w.fatalf("at step %d with %d new pods while the background analysis paused, want step 2 with 3", st.Step+1, w.newReplicas(d))
	}
	if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused ||
		!strings.Contains(c.Message, "held by the background analysis error-rate: it ended Inconclusive") {
		w.fatalf("Progressing %+v, want RolloutAnalysisPaused naming the background analysis", c)
	}
	measured := w.a.count()
	_, st := w.revision()
	w.annotate(rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(rev, st.Step, false))
	w.run(4)
	if d := w.f.deployment(); !rolloutstate.Complete(d, &d.Status) {
		w.fatalf("not complete after the promote: %+v", d.Status)
	}
	if run := w.background(rev); !run.Promoted || run.Phase != rolloutstate.AnalysisInconclusive || w.a.count() != measured {
		t.Errorf("background run %+v, %d measurements (%d before the promote); want Inconclusive, promoted, none more", run, w.a.count(), measured)
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisPromoted+" Revision 2: promoted past the background analysis error-rate (Inconclusive)") {
		t.Errorf("events:\n%s\nwant AnalysisPromoted", ev)
	}
}

// EX-6: a background analysis does not gate the steps: they go on while it measures, and it ends Successful
// after its count.
func TestBackgroundAnalysisDoesNotGateSteps(t *testing.T) {
	w := startBackground(t, "- setWeight: 30\n- pause: {duration: 1s}\n- setWeight: 60\n- pause: {duration: 10s}\n")
	const rev = 2
	if _, st := w.revision(); st.Step < 3 {
		w.fatalf("at step %d after 3 s, want the steps going on beside the background analysis (step 4)", st.Step+1)
	}
	w.run(3)
	if run := w.background(rev); run == nil || run.Phase != rolloutstate.AnalysisSuccessful || run.Metric("error-rate").Successful != 3 {
		w.fatalf("background run %+v, want Successful with 3", run)
	}
}

// EX-6: an invalid kubedeploy.io/rollout-analysis holds the rollout where it is (a Warning event); a typo never
// lets it go on unmeasured.
func TestBackgroundAnalysisInvalidHolds(t *testing.T) {
	w := newAnalysisWorld(t, backgroundSteps)
	w.annotate(rolloutstate.RolloutAnalysisAnnotation, "error-rate,Error_Rate")
	w.setImage(false)
	w.run(3)
	if n := w.newReplicas(w.f.deployment()); n != 0 {
		t.Errorf("new ReplicaSet at %d pods under an invalid background analysis, want 0", n)
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisTemplateInvalid+` invalid kubedeploy.io/rollout-analysis "error-rate,Error_Rate"`) {
		t.Errorf("events:\n%s\nwant AnalysisTemplateInvalid", ev)
	}
}

// EX-6: without rollout steps the background analysis does not run, and a Warning AnalysisIgnored says so while
// a rollout is under way; with the one step its message suggests (setWeight 100) it runs for the whole rollout.
func TestBackgroundAnalysisNeedsSteps(t *testing.T) {
	w := newBackgroundWorld(t, "- setWeight: 100\n")
	w.a.set(analysis.PhaseFailed, "0.4")
	w.setImage(false)
	w.run(3)
	if run := w.background(2); run == nil || run.Phase != rolloutstate.AnalysisFailed {
		w.fatalf("background run %+v beside setWeight 100, want Failed", run)
	}
	w = newAnalysisWorld(t, "- setWeight: 100\n")
	d := w.f.deployment()
	delete(d.Annotations, rolloutstate.RolloutStepsAnnotation)
	d.Annotations[rolloutstate.RolloutAnalysisAnnotation] = "error-rate"
	w.update(d, "background analysis without steps")
	w.setImage(false)
	w.run(3)
	if w.a.count() != 0 || w.background(2) != nil {
		t.Errorf("%d measurements, run %+v without steps; want none", w.a.count(), w.background(2))
	}
	if ev := strings.Join(w.f.Events(), "\n"); !strings.Contains(ev, AnalysisIgnored+" kubedeploy.io/rollout-analysis runs only beside kubedeploy.io/rollout-steps") {
		t.Errorf("events:\n%s\nwant AnalysisIgnored", ev)
	}
}
