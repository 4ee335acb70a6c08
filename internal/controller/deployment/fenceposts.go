package deployment

import (
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// newRSNewReplicas returns the size the new ReplicaSet should have now (RU-10):
// for RollingUpdate, its current size plus whatever the surge budget
// (f.MaxTotal() − Σ spec over allRSs) allows, never above replicas; for
// Recreate, replicas. newRS may be nil (not created yet, size 0). It returns
// an error for an unknown strategy.
func newRSNewReplicas(d *appsv1.Deployment, f rolloutstate.Fenceposts, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return f.Replicas, nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		current := sumSpecReplicas(allRSs)
		maxTotal := f.MaxTotal()
		newSize := specReplicas(newRS)
		if current >= maxTotal {
			return newSize, nil
		}
		return newSize + min(maxTotal-current, f.Replicas-newSize), nil
	default:
		return 0, unexpectedStrategyError(d)
	}
}
