package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// rolloutRecreate is one pass of the Recreate strategy (RC-1..RC-7): scale
// every old ReplicaSet to 0, wait until no old pod runs, then create (or
// scale) the new ReplicaSet at d.spec.replicas.
func (sc *syncContext) rolloutRecreate(ctx context.Context) (runner.Result, error) {
	scaled := false
	for _, rs := range activeReplicaSets(sc.oldRSs) {
		ok, err := sc.scaleReplicaSet(ctx, rs, 0)
		if err != nil {
			return runner.Result{}, err
		}
		scaled = scaled || ok
	}
	if scaled {
		return sc.syncRolloutStatus(ctx)
	}
	pods, err := sc.podMap()
	if err != nil {
		return runner.Result{}, err
	}
	if oldPodsRunning(sc.newRS, sc.oldRSs, pods) {
		return sc.syncRolloutStatus(ctx)
	}
	if err := sc.ensureNewReplicaSet(ctx); err != nil {
		return runner.Result{}, err
	}
	if _, err := sc.scaleReplicaSet(ctx, sc.newRS, desiredReplicas(sc.d)); err != nil {
		return runner.Result{}, err
	}
	if rolloutstate.Complete(sc.d, &sc.d.Status) {
		if err := sc.cleanupDeployment(ctx); err != nil {
			return runner.Result{}, err
		}
	}
	return sc.syncRolloutStatus(ctx)
}

// oldPodsRunning reports whether any old ReplicaSet still reports replicas or
// any pod of a ReplicaSet other than newRS is not Failed/Succeeded,
// terminating pods included (RC-3).
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podsByRS map[types.UID][]*v1.Pod) bool {
	for _, rs := range oldRSs {
		if rs.Status.Replicas > 0 {
			return true
		}
	}
	for uid, pods := range podsByRS {
		if newRS != nil && uid == newRS.UID {
			continue
		}
		for _, pod := range pods {
			if pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
