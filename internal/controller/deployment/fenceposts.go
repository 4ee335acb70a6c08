package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// desiredReplicas returns d.spec.replicas. A nil value (impossible after API
// defaulting, VA-1) is treated as the default, 1 replica.
func desiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// specReplicas returns rs.spec.replicas (spec(rs) in the spec). A nil value
// (impossible after API defaulting, VA-2) is treated as the default, 1.
func specReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// isRollingUpdate reports whether d uses the RollingUpdate strategy.
func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// rawFenceposts returns d's raw maxSurge and maxUnavailable; nil when unset.
func rawFenceposts(d *appsv1.Deployment) (surge, unavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// scaledValue resolves an int-or-percent against total replicas: nil is 0
// (RU-1), percents round up or down as asked (RU-2). A value that is neither
// an int nor a percent string returns an error.
func scaledValue(v *intstr.IntOrString, total int32, roundUp bool) (int32, error) {
	if v == nil {
		return 0, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(total), roundUp)
	return int32(n), err
}

// resolveFenceposts returns the absolute maxSurge (percent rounded up) and
// maxUnavailable (percent rounded down) for desired replicas; when both are
// 0, maxUnavailable is forced to 1 so a rollout can progress (RU-1..RU-3).
// An invalid value (rejected by validation, VA-8) is treated as 0 and the
// error is returned alongside the usable result.
func resolveFenceposts(maxSurgeValue, maxUnavailableValue *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	surge, errSurge := scaledValue(maxSurgeValue, desired, true)
	unavailable, errUnavailable := scaledValue(maxUnavailableValue, desired, false)
	if errSurge != nil {
		surge, err = 0, errSurge
	}
	if errUnavailable != nil {
		unavailable, err = 0, errUnavailable
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable, err
}

// maxSurge returns how many replicas above d.spec.replicas a rolling update
// may run: 0 for other strategies (RU-5). No special case for 0 replicas.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rawFenceposts(d)
	surge, _, _ := resolveFenceposts(s, u, desiredReplicas(d))
	return surge
}

// maxUnavailable returns how many of d.spec.replicas may be unavailable during
// a rolling update, capped at d.spec.replicas; 0 for other strategies or 0
// replicas (RU-4).
func maxUnavailable(d *appsv1.Deployment) int32 {
	replicas := desiredReplicas(d)
	if !isRollingUpdate(d) || replicas == 0 {
		return 0
	}
	s, u := rawFenceposts(d)
	_, unavailable, _ := resolveFenceposts(s, u, replicas)
	return min(unavailable, replicas)
}

// minAvailable returns d.spec.replicas − maxUnavailable for RollingUpdate,
// 0 otherwise (RU-6), in replicas.
func minAvailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	return desiredReplicas(d) - maxUnavailable(d)
}

// newRSNewReplicas returns the size the new ReplicaSet should have now (RU-10):
// for RollingUpdate, its current size plus whatever the surge budget
// (replicas + maxSurge − Σ spec over allRSs) allows, never above replicas;
// for Recreate, d.spec.replicas. newRS may be nil (not created yet, size 0).
// It returns an error for an invalid maxSurge or an unknown strategy.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	replicas := desiredReplicas(d)
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return replicas, nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		rawSurge, _ := rawFenceposts(d)
		surge, err := scaledValue(rawSurge, replicas, true)
		if err != nil {
			return 0, err
		}
		current := sumSpecReplicas(allRSs)
		maxTotal := clampInt32(int64(replicas) + int64(surge))
		newSize := specReplicas(newRS)
		if current >= maxTotal {
			return newSize, nil
		}
		return newSize + min(maxTotal-current, replicas-newSize), nil
	default:
		return 0, unexpectedStrategyError(d)
	}
}
