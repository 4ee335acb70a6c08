package deployment

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// calculateStatus returns d's status computed from its ReplicaSets (ST-1..ST-4):
// observedGeneration, replica counts, terminatingReplicas, collisionCount
// and the existing conditions with Available set for now against
// f.MinAvailable(). allRSs holds old and new ReplicaSets; newRS may be nil.
func calculateStatus(d *appsv1.Deployment, f rolloutstate.Fenceposts, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, now time.Time) appsv1.DeploymentStatus {
	status := rolloutstate.ReplicaCounts(allRSs, newRS)
	status.ObservedGeneration = d.Generation
	status.CollisionCount = d.Status.CollisionCount
	status.TerminatingReplicas = terminatingReplicas(allRSs)
	status.UnavailableReplicas = max(0, sumSpecReplicas(allRSs)-status.AvailableReplicas)
	for _, c := range d.Status.Conditions {
		status.Conditions = append(status.Conditions, *c.DeepCopy())
	}
	if status.AvailableReplicas >= f.MinAvailable() {
		setCondition(&status, newCondition(appsv1.DeploymentAvailable, v1.ConditionTrue, MinimumReplicasAvailable, minimumAvailableMessage, now))
	} else {
		setCondition(&status, newCondition(appsv1.DeploymentAvailable, v1.ConditionFalse, MinimumReplicasUnavailable, minimumUnavailableMessage, now))
	}
	return status
}

// terminatingReplicas returns Σ status.terminatingReplicas (ST-3): ReplicaSets
// never observed by their controller (observedGeneration 0, nil value) are
// skipped; any other nil value makes the sum unknown (nil).
func terminatingReplicas(allRSs []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range allRSs {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil && rs.Status.ObservedGeneration == 0:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

// deploymentProgressing reports whether newStatus shows progress over d's
// stored status (ST-10): more updated, fewer old, more ready or more
// available replicas.
func deploymentProgressing(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus) bool {
	old := d.Status
	return newStatus.UpdatedReplicas > old.UpdatedReplicas ||
		newStatus.Replicas-newStatus.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		newStatus.ReadyReplicas > old.ReadyReplicas ||
		newStatus.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut reports whether the Progressing condition in newStatus
// is older than progressDeadlineSeconds at now (ST-11).
func deploymentTimedOut(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus, now time.Time) bool {
	if !rolloutstate.HasProgressDeadline(d) {
		return false
	}
	cond := rolloutstate.Condition(newStatus, appsv1.DeploymentProgressing)
	if cond == nil {
		return false
	}
	switch cond.Reason {
	case rolloutstate.NewReplicaSetAvailable:
		return false
	case rolloutstate.ProgressDeadlineExceeded:
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(now)
}
