package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Event reasons of EX-5.
const (
	// InvalidRolloutSteps is the Warning event reason for a rolloutstate.RolloutStepsAnnotation kubedeploy
	// cannot use; the message names the fault. It is also the Progressing=False reason meanwhile.
	InvalidRolloutSteps = rolloutstate.InvalidRolloutSteps
	// RolloutStepStarted is the Normal event reason of each step a rollout starts, and of its last step's end.
	RolloutStepStarted = "RolloutStepStarted"
	// RolloutAborted is the Warning event reason of `kubedeploy rollout abort` carried out; the message names
	// both revisions.
	RolloutAborted = "RolloutAborted"
	// RolloutAbortSkipped is the Warning event reason when an abort has no earlier revision to return to.
	RolloutAbortSkipped = "RolloutAbortSkipped"
)

// rolloutSteps is where a Deployment's rollout with steps stands in this sync (EX-5): its valid steps and
// their progress, or the error that makes them invalid.
type rolloutSteps struct {
	steps    rolloutstate.Steps
	progress rolloutstate.StepProgress
	invalid  *rolloutstate.StepsError
	// analysis is how the current analysis step holds the rollout (EX-6), nil at any other step.
	analysis *analysisHold
	// background is the background analysis (EX-6), nil without kubedeploy.io/rollout-analysis.
	background *backgroundHold
}

// syncSteps reads d's rollout steps (EX-5) and sets sc.partition to the limit the current step puts on the new
// ReplicaSet: for invalid steps, where the rollout is (a Warning event names the fault); for valid ones, the
// current step's (rolloutstate.AdvanceSteps), after recording on d, with one write of its stored status (the
// annotation goes with it, and the generation stays) before anything acts on it, every step that started (a
// Normal event each). Nothing is recorded for a paused Deployment or
// before the new ReplicaSet exists; steps do not apply to a first rollout or to EX-2's and an abort's
// rollbacks (rolloutstate.StepsApply). It returns the API error of the record.
func (sc *syncContext) syncSteps(ctx context.Context) error {
	if !rolloutstate.HasRolloutSteps(sc.d) {
		sc.backgroundWithoutSteps()
		return nil
	}
	rev := sc.newRevision()
	if !rolloutstate.StepsApply(sc.d, rev, sc.newRS, sc.allRSs()) {
		return nil
	}
	replicas := rolloutstate.Replicas(sc.d)
	steps, invalid := rolloutstate.StepsOf(sc.d)
	if invalid != nil {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, InvalidRolloutSteps, "%v; %s", invalid, rolloutstate.StepsEffect)
		sc.partition = rolloutPartition{Partition: rolloutstate.Partition{Set: true, Replicas: replicas}, steps: &rolloutSteps{invalid: invalid}}
		return nil
	}
	stored := sc.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation]
	background := sc.syncBackground(ctx, rev) // EX-6
	p := rolloutstate.AdvanceSteps(rolloutstate.StepInput{D: sc.d, Steps: steps, Revision: rev, NewRS: sc.newRS, AllRSs: sc.allRSs(), Now: sc.now,
		Held: background.holds()})
	sc.partition = rolloutPartition{Partition: p.Partition, steps: &rolloutSteps{steps: steps, progress: p, background: background}}
	if p.Wait == rolloutstate.StepWaitTime {
		sc.requeueAt(p.Remaining) // the earliest wins: the background analysis may be due sooner
	}
	if err := sc.recordStep(ctx, steps, p, rev, replicas); err != nil {
		return err
	}
	if err := sc.writeBackground(ctx, stored); err != nil {
		return err
	}
	if p.Wait == rolloutstate.StepWaitAnalysis && p.State.Step < len(steps) && steps[p.State.Step].Analysis != nil && rev != 0 && !sc.d.Spec.Paused {
		return sc.syncAnalysis(ctx, steps, p) // EX-6
	}
	return nil
}

// recordStep records p's state on d (one write of its stored status) when it changed, with a Normal event for
// every step that started; nothing for a paused Deployment or before the new ReplicaSet exists. It returns
// the API error.
func (sc *syncContext) recordStep(ctx context.Context, steps rolloutstate.Steps, p rolloutstate.StepProgress, rev int64, replicas int32) error {
	if !p.Changed || rev == 0 || sc.d.Spec.Paused {
		return nil
	}
	// Through the status subresource: an annotation written there does not bump the generation (the apps
	// status strategy keeps the spec and labels, not the annotations), so a rollout's steps never look like a
	// spec change to `kubectl rollout status` or a GitOps tool, as EX-2's complete-revision is written.
	if sc.d.Annotations == nil {
		sc.d.Annotations = map[string]string{}
	}
	sc.d.Annotations[rolloutstate.RolloutStepAnnotation] = p.State.Encode()
	if err := sc.writeStatus(ctx); err != nil {
		return fmt.Errorf("recording step %d of revision %d: %w", p.State.Step+1, rev, err)
	}
	for _, i := range p.Started {
		sc.c.recorder.Event(sc.d, v1.EventTypeNormal, RolloutStepStarted, stepStartedMessage(steps, i, rev, replicas))
	}
	sc.logger.V(2).Info("Rollout step started", "revision", rev, "step", p.State.Step+1, "of", len(steps), "wait", p.Wait)
	return nil
}

// stepStartedMessage says that step i (0-based; len(steps): every step done) of revision started.
func stepStartedMessage(steps rolloutstate.Steps, i int, rev int64, replicas int32) string {
	if i >= len(steps) {
		return fmt.Sprintf("Revision %d: every rollout step is done; rolling out to all %d replicas", rev, replicas)
	}
	return fmt.Sprintf("Revision %d: step %d of %d (%s) started; at most %d of %d pods on the new template",
		rev, i+1, len(steps), steps[i], rolloutstate.StepPods(steps.WeightAt(i), replicas), replicas)
}

// newRevision returns the new ReplicaSet's revision, 0 while there is none (or it does not parse).
func (sc *syncContext) newRevision() int64 {
	if sc.newRS == nil {
		return 0
	}
	rev, err := revision(sc.newRS)
	if err != nil {
		return 0
	}
	return rev
}

// hold returns the Progressing condition steps hold a rollout with, limit being the partition's: False with
// InvalidRolloutSteps while invalid steps hold it below d.spec.replicas, True with RolloutStepPaused once a
// pause step holds it (the step's pods updated and available: rolloutstate.HeldAtPartition), nil otherwise
// (a setWeight on its way: the progress deadline runs). The message says which step, the pods it holds and
// until when.
func (s *rolloutSteps) hold(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, limit int32) *appsv1.DeploymentCondition {
	replicas := desiredReplicas(d)
	switch {
	case s.invalid != nil && limit < replicas:
		msg := fmt.Sprintf("%v; holding %d of %d pods on the new template until the annotation is fixed or removed", s.invalid, status.UpdatedReplicas, replicas)
		return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionFalse, Reason: rolloutstate.InvalidRolloutSteps, Message: msg}
	case s.invalid != nil:
		return nil
	case s.progress.Wait != rolloutstate.StepWaitTime && s.progress.Wait != rolloutstate.StepWaitPromotion && s.progress.Wait != rolloutstate.StepWaitAnalysis:
		return nil
	case !rolloutstate.HeldAtPartition(d, status, newRS, limit):
		return nil
	case s.background.holds():
		return s.background.condition(d, status, newRS, replicas)
	case s.progress.Wait == rolloutstate.StepWaitAnalysis:
		return s.analysisCondition(d, status, newRS, replicas)
	}
	msg := rolloutstate.StepPausedMessage(progressSubject(d, newRS), d.Name, s.steps, s.progress.State, status.UpdatedReplicas, replicas)
	return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutStepPaused, Message: msg}
}

// abortDue reports why the current revision's rollout is to be aborted (EX-5), "" when it is not: `kubedeploy
// rollout abort` asked, or its analysis at the current step failed (EX-6); never once it has completed.
func (sc *syncContext) abortDue() string {
	switch {
	case rolloutstate.Complete(sc.d, &sc.d.Status):
		return ""
	case rolloutstate.AbortRequested(sc.d, sc.newRevision()):
		return "as asked (" + rolloutstate.RolloutAbortAnnotation + ")"
	case sc.analysisFailed():
		return "as its analysis failed"
	}
	return ""
}

// abortRollout rolls d back from its current revision as EX-2 does (autoRollback), as `kubedeploy rollout
// abort` asked: to the last complete revision (rolloutstate.PlanAutoRollback), or, when none is recorded, to
// the old ReplicaSet holding the most replicas (the one the steps kept the rest of the pods on). It records
// the aborted revision in rolloutstate.FailedRevisionAnnotation and emits RolloutAborted naming both; with
// nothing to return to it emits RolloutAbortSkipped and writes nothing. It returns the API errors.
func (sc *syncContext) abortRollout(ctx context.Context, why string) error {
	rev := sc.newRevision()
	target := rolloutstate.PlanAutoRollback(sc.d, sc.newRS, sc.oldRSs).Target
	if target == nil {
		target = largestOld(sc.oldRSs)
	}
	if target == nil {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, RolloutAbortSkipped, "Not aborting revision %d: no earlier ReplicaSet to return to", rev)
		return nil
	}
	to, _ := revision(target)
	err := sc.patchDeploymentToTemplateOf(ctx, target, func(d *appsv1.Deployment) {
		annotations := rollbackAnnotations(d, target)
		annotations[rolloutstate.FailedRevisionAnnotation] = fmt.Sprint(rev)
		d.Annotations = annotations
	})
	if err != nil {
		return fmt.Errorf("aborting revision %d, rolling back to revision %d: %w", rev, to, err)
	}
	msg := fmt.Sprintf("Aborted the rollout of revision %d %s, rolling back to revision %d (ReplicaSet %q)", rev, why, to, target.Name)
	sc.c.recorder.Event(sc.d, v1.EventTypeWarning, RolloutAborted, msg)
	sc.logger.Info("Aborted a rollout", "revision", rev, "to", to, "replicaSet", klog.KObj(target))
	setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, msg+".", sc.now))
	if err := sc.writeStatus(ctx); err != nil {
		return fmt.Errorf("restarting the progress deadline after aborting: %w", err)
	}
	return nil
}

// largestOld returns the old ReplicaSet with the most replicas, the newest revision among equals; nil when
// none has any.
func largestOld(oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var best *appsv1.ReplicaSet
	var bestRev int64
	for _, rs := range oldRSs {
		n := rolloutstate.ReplicaSetReplicas(rs)
		if n == 0 {
			continue
		}
		rev, _ := revision(rs)
		if best == nil || n > rolloutstate.ReplicaSetReplicas(best) || n == rolloutstate.ReplicaSetReplicas(best) && rev > bestRev {
			best, bestRev = rs, rev
		}
	}
	return best
}
