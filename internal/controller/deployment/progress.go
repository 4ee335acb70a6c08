package deployment

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// rolloutStatus returns the status a rolling or recreate pass writes
// (ST-8, ST-13, ST-14): calculateStatus, then the Progressing condition
// estimated against d's stored status, then ReplicaFailure mirrored from the
// ReplicaSets. f are d's rolloutstate.Fenceposts and p its partition (EX-1),
// both read once per sync; allRSs holds old and new ReplicaSets; newRS may
// be nil.
func rolloutStatus(d *appsv1.Deployment, f rolloutstate.Fenceposts, p rolloutPartition, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, now time.Time) appsv1.DeploymentStatus {
	status := calculateStatus(d, f, allRSs, newRS, now)
	if !rolloutstate.HasProgressDeadline(d) {
		removeCondition(&status, appsv1.DeploymentProgressing)
	}
	cur := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	settled := status.Replicas == status.UpdatedReplicas && cur != nil && cur.Reason == rolloutstate.NewReplicaSetAvailable
	if rolloutstate.HasProgressDeadline(d) && !settled {
		setProgressingCondition(d, &status, newRS, p.hold(d, &status, newRS, allRSs), cur, now)
	}
	if c, ok := replicaFailureCondition(allRSs, newRS); ok {
		setCondition(&status, c)
	} else {
		removeCondition(&status, appsv1.DeploymentReplicaFailure)
	}
	return status
}

// hold returns the Progressing condition a partition (EX-1) holds a rollout
// with, from status, the status about to be written: reason
// InvalidRolloutPartition (False) while an invalid value holds it where it
// is, RolloutPartitioned (True) once it is held (rolloutstate.HeldAtPartition),
// nil otherwise. The messages are rolloutstate's, so that `rollout plan` and
// `rollout watch` say the same.
func (p rolloutPartition) hold(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	limit := p.newReplicaSetLimit(newRS, allRSs)
	if p.steps != nil {
		return p.steps.hold(d, status, newRS, limit)
	}
	replicas := desiredReplicas(d)
	subject := progressSubject(d, newRS)
	switch {
	case p.invalid != nil && limit < replicas:
		msg := rolloutstate.InvalidPartitionMessage(p.invalid, status.UpdatedReplicas, replicas)
		return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionFalse, Reason: rolloutstate.InvalidRolloutPartition, Message: msg}
	case rolloutstate.HeldAtPartition(d, status, newRS, limit):
		msg := rolloutstate.HeldMessage(subject, status.UpdatedReplicas, replicas, rolloutstate.KeptBackUnavailable(d, status))
		return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutPartitioned, Message: msg}
	}
	return nil
}

// progressSubject names what the Progressing messages are about: the new
// ReplicaSet, or d while it has none.
func progressSubject(d *appsv1.Deployment, newRS *appsv1.ReplicaSet) string {
	if newRS != nil {
		return fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	return fmt.Sprintf("Deployment %q", d.Name)
}

// setProgressingCondition applies the first matching rule of ST-13 to status:
// complete, held by a partition (EX-1: hold, see rolloutPartition.hold; the
// deadline does not run), progressing (always rewritten), or timed out.
func setProgressingCondition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, hold *appsv1.DeploymentCondition, cur *appsv1.DeploymentCondition, now time.Time) {
	subject := progressSubject(d, newRS)
	switch {
	case rolloutstate.Complete(d, status):
		setCondition(status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.NewReplicaSetAvailable,
			subject+" has successfully progressed.", now))
	case hold != nil:
		// The message follows the counts (a scaled Deployment holds at a
		// new limit); an unchanged hold is not rewritten.
		if cur != nil && cur.Reason == hold.Reason && cur.Message == hold.Message {
			return
		}
		cond := newCondition(appsv1.DeploymentProgressing, hold.Status, hold.Reason, hold.Message, now)
		if cur != nil && cur.Status == hold.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(status, appsv1.DeploymentProgressing)
		status.Conditions = append(status.Conditions, cond)
	case deploymentProgressing(d, status) || (cur != nil && heldReason(cur.Reason)):
		// A rollout leaving its hold (the partition raised, fixed or
		// removed, or held pods no longer available) starts its deadline
		// afresh, as a resumed one does (SD-6).
		cond := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, subject+" is progressing.", now)
		if cur != nil && cur.Status == v1.ConditionTrue {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(status, appsv1.DeploymentProgressing)
		status.Conditions = append(status.Conditions, cond)
	case deploymentTimedOut(d, status, now):
		setCondition(status, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, rolloutstate.ProgressDeadlineExceeded,
			subject+" has timed out progressing.", now))
	}
}

// heldReason reports whether a Progressing reason is one a partition (EX-1)
// or a rollout step (EX-5) holds a rollout with: no progress deadline runs
// meanwhile.
func heldReason(reason string) bool {
	switch reason {
	case rolloutstate.RolloutPartitioned, rolloutstate.InvalidRolloutPartition, rolloutstate.RolloutStepPaused, rolloutstate.InvalidRolloutSteps,
		rolloutstate.RolloutAnalysisRunning, rolloutstate.RolloutAnalysisPaused:
		return true
	}
	return false
}

// stuckRequeueAfter returns when to look at d again to notice a progress
// deadline passing, or 0 for never (ST-16). It is only asked when the sync
// wrote no status. Upstream requeues through the rate limiter when the
// deadline is less than 1s away; kubedeploy uses a plain delayed requeue
// (IM-5) of the remaining time plus 1s, which is at most 1s in that case.
func stuckRequeueAfter(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus, now time.Time) time.Duration {
	if !rolloutstate.HasProgressDeadline(d) {
		return 0
	}
	cur := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	if cur == nil || cur.Reason == rolloutstate.ProgressDeadlineExceeded || heldReason(cur.Reason) || rolloutstate.Complete(d, newStatus) {
		return 0 // held by a partition: no deadline (EX-1)
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(now)
	return max(after, 0) + time.Second
}
