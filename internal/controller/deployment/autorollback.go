package deployment

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Event reasons of EX-2.
const (
	// AutoRolledBack is the Warning event reason of an automatic rollback;
	// its message names both revisions.
	AutoRolledBack = "DeploymentAutoRolledBack"
	// AutoRollbackSkipped is the Warning event reason when an opted-in
	// Deployment exceeded its deadline but is not rolled back: no revision
	// completed before, its ReplicaSet is gone, or the failed rollout was
	// itself an automatic rollback.
	AutoRollbackSkipped = "DeploymentAutoRollbackSkipped"
)

// markComplete records on sc.newRS that its rollout completed (EX-2): when d is opted in and status, the
// status this sync is about to write, counts every replica of the current generation updated and available
// (rolloutstate.Complete, from this sync's ReplicaSets, never from a condition a previous revision left), it sets
// rolloutstate.CompletedAtRevisionAnnotation on the new ReplicaSet to that ReplicaSet's revision, with one
// metadata patch, once per revision. The record lives on the ReplicaSet so that a hand-run `kubectl rollout
// undo`, which replaces d's annotations, cannot erase it. It returns the API error.
func (sc *syncContext) markComplete(ctx context.Context, status *appsv1.DeploymentStatus) error {
	rs := sc.newRS
	if !rolloutstate.TracksCompletion(sc.d) || rs == nil || !rolloutstate.Complete(sc.d, status) {
		return nil
	}
	rev, err := revision(rs)
	if err != nil || rev <= 0 || rs.Annotations[rolloutstate.CompletedAtRevisionAnnotation] == strconv.FormatInt(rev, 10) {
		return nil
	}
	modified := rs.DeepCopy()
	modified.Annotations[rolloutstate.CompletedAtRevisionAnnotation] = strconv.FormatInt(rev, 10)
	if _, err := sc.patchReplicaSet(ctx, rs, modified); err != nil {
		return fmt.Errorf("recording that revision %d completed on ReplicaSet %s: %w", rev, rs.Name, err)
	}
	sc.logger.V(2).Info("Recorded a complete revision", "revision", rev, "replicaSet", klog.KObj(rs))
	return nil
}

// recordCompleteRevision makes d's rolloutstate.CompleteRevisionAnnotation show the last complete revision
// among rss, d's ReplicaSets (rolloutstate.LastComplete), when d is opted into EX-2: it sets it when that
// revision is higher than the one shown (or none is, as after `kubectl rollout undo`), never lowers it (a
// higher one whose ReplicaSet history cleanup deleted stays), and removes the ReplicaSet's
// rolloutstate.CompletedAtRevisionAnnotation that an undo copies onto d. It reports whether d's annotations
// changed; the caller writes them with the status.
func recordCompleteRevision(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) bool {
	if !rolloutstate.TracksCompletion(d) {
		return false
	}
	changed := false
	if _, ok := d.Annotations[rolloutstate.CompletedAtRevisionAnnotation]; ok {
		delete(d.Annotations, rolloutstate.CompletedAtRevisionAnnotation)
		changed = true
	}
	_, last := rolloutstate.LastComplete(rss)
	shown, err := strconv.ParseInt(d.Annotations[rolloutstate.CompleteRevisionAnnotation], 10, 64)
	if last > 0 && (err != nil || last > shown) {
		d.Annotations[rolloutstate.CompleteRevisionAnnotation] = strconv.FormatInt(last, 10)
		changed = true
	}
	return changed
}

// autoRollbackDue reports whether this sync should act on EX-2: d opted in,
// not paused, its stored status failed for the current generation.
func (sc *syncContext) autoRollbackDue() bool {
	d := sc.d
	return rolloutstate.RollsBackOnDeadline(d) && !d.Spec.Paused && rolloutstate.HasProgressDeadline(d) &&
		d.Status.ObservedGeneration >= d.Generation && rolloutstate.DeadlineExceeded(&d.Status)
}

// autoRollback rolls d back as rolloutstate.PlanAutoRollback decides (EX-2): it copies
// the target ReplicaSet's template (without pod-template-hash) and
// annotations into d as `kubectl rollout undo` does (RB-5, RB-6), except
// that d keeps its own kubedeploy.io/ annotations, records the failed
// revision in rolloutstate.FailedRevisionAnnotation, patches d, emits the Warning event
// AutoRolledBack and starts the rollback's progress deadline afresh (so
// `kubectl rollout status` follows the new rollout instead of reporting the
// old failure). It reports whether it rolled back; a skipped rollback
// writes nothing (the event is emitted when the deadline is first
// exceeded, see syncRolloutStatus). It returns the API errors.
func (sc *syncContext) autoRollback(ctx context.Context) (bool, error) {
	p := rolloutstate.PlanAutoRollback(sc.d, sc.newRS, sc.oldRSs)
	if p.Target == nil {
		return false, nil
	}
	target, _ := revision(p.Target)
	err := sc.patchDeploymentToTemplateOf(ctx, p.Target, func(d *appsv1.Deployment) {
		annotations := rollbackAnnotations(d, p.Target)
		annotations[rolloutstate.FailedRevisionAnnotation] = strconv.FormatInt(p.Failed, 10)
		d.Annotations = annotations
	})
	if err != nil {
		return false, fmt.Errorf("rolling back to revision %d: %w", target, err)
	}
	msg := fmt.Sprintf("Rolled back deployment %q from revision %d, which exceeded its progress deadline, to revision %d (ReplicaSet %q)",
		sc.d.Name, p.Failed, target, p.Target.Name)
	sc.c.recorder.Event(sc.d, v1.EventTypeWarning, AutoRolledBack, msg)
	sc.logger.Info("Rolled back a deployment that exceeded its progress deadline", "failedRevision", p.Failed, "revision", target, "replicaSet", p.Target.Name)
	setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, msg+".", sc.now))
	if err := sc.writeStatus(ctx); err != nil {
		return true, fmt.Errorf("restarting the progress deadline after rolling back: %w", err)
	}
	return true, nil
}

// autoRollbackSkippedEvent emits AutoRollbackSkipped when d, opted into
// EX-2, has just exceeded its deadline (prev did not, status does) and will
// not be rolled back.
func (sc *syncContext) autoRollbackSkippedEvent(prev, status *appsv1.DeploymentStatus) {
	if !rolloutstate.RollsBackOnDeadline(sc.d) || rolloutstate.DeadlineExceeded(prev) || !rolloutstate.DeadlineExceeded(status) {
		return
	}
	if p := rolloutstate.PlanAutoRollback(sc.d, sc.newRS, sc.oldRSs); p.Target == nil {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, AutoRollbackSkipped, "Not rolling back automatically: %s", p.Skipped)
	}
}
