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
	cur := getCondition(&d.Status, appsv1.DeploymentProgressing)
	settled := status.Replicas == status.UpdatedReplicas && cur != nil && cur.Reason == rolloutstate.NewReplicaSetAvailable
	if rolloutstate.HasProgressDeadline(d) && !settled {
		setProgressingCondition(d, &status, newRS, p.newReplicaSetLimit(newRS, allRSs), cur, now)
	}
	if c, ok := replicaFailureCondition(allRSs, newRS); ok {
		setCondition(&status, c)
	} else {
		removeCondition(&status, appsv1.DeploymentReplicaFailure)
	}
	return status
}

// setProgressingCondition applies the first matching rule of ST-13 to status:
// complete, held at a partition (EX-1), progressing (always rewritten), or
// timed out. limit is the new ReplicaSet's partition limit (EX-1).
func setProgressingCondition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, limit int32, cur *appsv1.DeploymentCondition, now time.Time) {
	subject := fmt.Sprintf("Deployment %q", d.Name)
	if newRS != nil {
		subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	switch {
	case rolloutstate.Complete(d, status):
		setCondition(status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.NewReplicaSetAvailable,
			subject+" has successfully progressed.", now))
	case heldAtPartition(d, status, newRS, limit):
		// EX-1: held, as asked; the deadline does not run. The message
		// follows the counts (a scaled Deployment holds at a new limit).
		msg := partitionMessage(subject, status.UpdatedReplicas, desiredReplicas(d))
		if cur != nil && cur.Reason == rolloutstate.RolloutPartitioned && cur.Message == msg {
			return
		}
		cond := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.RolloutPartitioned, msg, now)
		if cur != nil && cur.Status == v1.ConditionTrue {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(status, appsv1.DeploymentProgressing)
		status.Conditions = append(status.Conditions, cond)
	case deploymentProgressing(d, status) || (cur != nil && cur.Reason == rolloutstate.RolloutPartitioned):
		// A rollout leaving its hold (the partition raised or removed, or
		// held pods no longer available) starts its deadline afresh, as a
		// resumed one does (SD-6).
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

// stuckRequeueAfter returns when to look at d again to notice a progress
// deadline passing, or 0 for never (ST-16). It is only asked when the sync
// wrote no status. Upstream requeues through the rate limiter when the
// deadline is less than 1s away; kubedeploy uses a plain delayed requeue
// (IM-5) of the remaining time plus 1s, which is at most 1s in that case.
func stuckRequeueAfter(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus, now time.Time) time.Duration {
	if !rolloutstate.HasProgressDeadline(d) {
		return 0
	}
	cur := getCondition(&d.Status, appsv1.DeploymentProgressing)
	if cur == nil || cur.Reason == rolloutstate.ProgressDeadlineExceeded || cur.Reason == rolloutstate.RolloutPartitioned || rolloutstate.Complete(d, newStatus) {
		return 0 // rolloutstate.RolloutPartitioned: held, no deadline (EX-1)
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(now)
	return max(after, 0) + time.Second
}
