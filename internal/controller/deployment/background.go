package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// backgroundHold is where the background analysis of a rollout with steps stands in this sync (EX-6,
// rolloutstate.RolloutAnalysisAnnotation): its templates, its run (nil before it started) and, when it cannot
// measure (an invalid annotation, templates that cannot be used), why.
type backgroundHold struct {
	analysis *rolloutstate.StepAnalysis
	run      *rolloutstate.AnalysisRun
	why      string
}

// holds reports whether the background analysis holds the rollout where it is: paused for a human
// (Inconclusive or Error, not promoted past), or unable to measure.
func (b *backgroundHold) holds() bool {
	return b != nil && (b.run.Paused() || b.why != "")
}

// syncBackground runs the background analysis of revision rev (EX-6) from the rollout's first step until it
// completes: it records the measurements taken since the last sync, decides the run's phase from its templates'
// limits (an event when it ends), starts the measurements that are due, and, when `kubedeploy rollout promote`
// names the step the rollout is at while the run is paused, records the run promoted past. The record goes in
// sc.d's annotations only; the caller writes it (writeBackground) once the partition is known. It returns nil
// without the annotation, for a paused Deployment the run as recorded (nothing measured), and for an invalid
// annotation a hold naming the fault (with a Warning event): a typo never lets a rollout go on unmeasured.
func (sc *syncContext) syncBackground(ctx context.Context, rev int64) *backgroundHold {
	a, err := rolloutstate.BackgroundAnalysisOf(sc.d)
	switch {
	case err != nil:
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, AnalysisTemplateInvalid, "%v; holding the rollout until fixed", err)
		return &backgroundHold{analysis: &rolloutstate.StepAnalysis{}, why: err.Error()}
	case a == nil, rev == 0:
		return nil
	}
	rec := rolloutstate.AnalysisRecordOf(sc.d, rev)
	if sc.d.Spec.Paused {
		return &backgroundHold{analysis: a, run: rec.Run(rolloutstate.BackgroundRun)}
	}
	run := rec.Start(rolloutstate.BackgroundRun, sc.now)
	b := &backgroundHold{analysis: a, run: run}
	switch {
	case run.Paused() && sc.backgroundPromoted(rev):
		run.Promoted = true
		sc.c.recorder.Eventf(sc.d, v1.EventTypeNormal, AnalysisPromoted, "Revision %d: promoted past the background %s (%s); it measures no more", rev, a, run.Phase)
	case run.Phase == "" && sc.c.analyses != nil && !rolloutstate.Complete(sc.d, &sc.d.Status):
		hold := &analysisHold{}
		sc.measureStep(ctx, a, run, hold)
		b.why = hold.why
	}
	if sc.d.Annotations == nil {
		sc.d.Annotations = map[string]string{}
	}
	sc.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] = rec.Encode()
	return b
}

// backgroundWithoutSteps emits a Warning AnalysisIgnored while a rollout of a Deployment that has
// kubedeploy.io/rollout-analysis but no kubedeploy.io/rollout-steps is under way: the background analysis runs
// only beside steps (EX-6), and an annotation that silently does nothing would surprise its author.
func (sc *syncContext) backgroundWithoutSteps() {
	if _, ok := sc.d.Annotations[rolloutstate.RolloutAnalysisAnnotation]; !ok || rolloutstate.Complete(sc.d, &sc.d.Status) {
		return
	}
	sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, AnalysisIgnored, "%s runs only beside %s, which this Deployment does not have: "+
		"this rollout is not analysed (a single step `- setWeight: 100` runs it for the whole rollout)",
		rolloutstate.RolloutAnalysisAnnotation, rolloutstate.RolloutStepsAnnotation)
}

// backgroundPromoted reports whether RolloutPromoteAnnotation names the step revision rev's rollout is at (as
// recorded; the step count once every step is done), or every step left.
func (sc *syncContext) backgroundPromoted(rev int64) bool {
	st, ok := rolloutstate.StepStateOf(sc.d)
	return ok && st.Revision == rev && rolloutstate.Promoted(sc.d, rev, st.Step)
}

// writeBackground writes the background analysis's record when it differs from stored (the annotation's value
// when the sync read d), with the Progressing condition a paused run holds the rollout with (pausedCondition).
// It returns the API error.
func (sc *syncContext) writeBackground(ctx context.Context, stored string) error {
	if sc.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] == stored {
		return nil
	}
	sc.pausedCondition()
	if err := sc.writeStatus(ctx); err != nil {
		return fmt.Errorf("recording the background analysis: %w", err)
	}
	return nil
}

// condition returns the Progressing condition the background analysis b holds the rollout with:
// RolloutAnalysisPaused while its run waits for a human, RolloutAnalysisRunning while it cannot measure.
func (b *backgroundHold) condition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, replicas int32) *appsv1.DeploymentCondition {
	var phase rolloutstate.AnalysisPhase
	reason := rolloutstate.RolloutAnalysisRunning
	if b.run.Paused() {
		phase, reason = b.run.Phase, rolloutstate.RolloutAnalysisPaused
	}
	msg := rolloutstate.BackgroundHeldMessage(progressSubject(d, newRS), d.Name, b.analysis, phase, b.why, status.UpdatedReplicas, replicas)
	return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: reason, Message: msg}
}
