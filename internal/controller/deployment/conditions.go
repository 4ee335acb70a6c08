package deployment

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// newCondition returns a Deployment condition whose lastUpdateTime and
// lastTransitionTime are both now (ST-6).
func newCondition(t appsv1.DeploymentConditionType, status v1.ConditionStatus, reason, message string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            message,
		LastUpdateTime:     ts,
		LastTransitionTime: ts,
	}
}

// setCondition sets cond in status (ST-7): an existing condition of the same
// type with the same status and reason is left untouched; with the same
// status but another reason it is replaced keeping its lastTransitionTime;
// otherwise it is replaced as is. A replaced condition moves to the end.
func setCondition(status *appsv1.DeploymentStatus, cond appsv1.DeploymentCondition) {
	if cur := rolloutstate.Condition(status, cond.Type); cur != nil {
		if cur.Status == cond.Status && cur.Reason == cond.Reason {
			return
		}
		if cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
	}
	removeCondition(status, cond.Type)
	status.Conditions = append(status.Conditions, cond)
}

// removeCondition deletes every condition of type t from status.
func removeCondition(status *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var kept []appsv1.DeploymentCondition
	for _, c := range status.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	status.Conditions = kept
}

// replicaFailureCondition returns the Deployment ReplicaFailure condition
// mirroring the first ReplicaFailure condition of newRS, or else of any
// ReplicaSet in allRSs; ok is false when there is none (ST-14).
func replicaFailureCondition(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (appsv1.DeploymentCondition, bool) {
	find := func(rs *appsv1.ReplicaSet) (appsv1.DeploymentCondition, bool) {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return appsv1.DeploymentCondition{
					Type:               appsv1.DeploymentReplicaFailure,
					Status:             c.Status,
					Reason:             c.Reason,
					Message:            c.Message,
					LastUpdateTime:     c.LastTransitionTime,
					LastTransitionTime: c.LastTransitionTime,
				}, true
			}
		}
		return appsv1.DeploymentCondition{}, false
	}
	if newRS != nil {
		if c, ok := find(newRS); ok {
			return c, true
		}
	}
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		if c, ok := find(rs); ok {
			return c, true
		}
	}
	return appsv1.DeploymentCondition{}, false
}
