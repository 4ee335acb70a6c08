package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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

// fenceposts are a Deployment's rolling-update bounds, resolved once per
// sync from its spec (RU-1..RU-6), all in replicas.
type fenceposts struct {
	// replicas is d.spec.replicas (desiredReplicas).
	replicas int32
	// maxSurge is how many replicas above replicas a rolling update may
	// run: percent rounded up, 0 for other strategies, no special case for
	// 0 replicas (RU-5).
	maxSurge int32
	// maxUnavailable is how many of replicas may be unavailable during a
	// rolling update: percent rounded down, forced to 1 when both resolve
	// to 0 (RU-3), capped at replicas; 0 for other strategies or 0 replicas
	// (RU-4).
	maxUnavailable int32
}

// fencepostsOf resolves d's fenceposts. For a RollingUpdate Deployment an
// invalid maxSurge or maxUnavailable (rejected by validation, VA-8) counts
// as 0 and its parse error is returned alongside the usable result; the
// sync fails with it, as upstream's NewRSNewReplicas does.
func fencepostsOf(d *appsv1.Deployment) (fenceposts, error) {
	f := fenceposts{replicas: desiredReplicas(d)}
	if !isRollingUpdate(d) {
		return f, nil
	}
	s, u := rawFenceposts(d)
	surge, unavailable, err := resolveFenceposts(s, u, f.replicas)
	f.maxSurge = surge
	if f.replicas > 0 {
		f.maxUnavailable = min(unavailable, f.replicas)
	}
	return f, err
}

// maxTotal returns replicas + maxSurge, the most replicas the Deployment's
// ReplicaSets may have in total (RU-10, PS-3), clamped to MaxInt32 instead
// of wrapping.
func (f fenceposts) maxTotal() int32 {
	return clampInt32(int64(f.replicas) + int64(f.maxSurge))
}

// minAvailable returns replicas − maxUnavailable: the availability floor of
// a rolling update (RU-6, RU-11) and the threshold of the Available
// condition (ST-4, RC-9). Upstream's MinAvailable is 0 for other strategies;
// this is replicas there, as the Available condition needs, and the
// rolling-update code only runs for RollingUpdate.
func (f fenceposts) minAvailable() int32 {
	return f.replicas - f.maxUnavailable
}

// newRSNewReplicas returns the size the new ReplicaSet should have now (RU-10):
// for RollingUpdate, its current size plus whatever the surge budget
// (f.maxTotal() − Σ spec over allRSs) allows, never above replicas; for
// Recreate, replicas. newRS may be nil (not created yet, size 0). It returns
// an error for an unknown strategy.
func newRSNewReplicas(d *appsv1.Deployment, f fenceposts, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return f.replicas, nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		current := sumSpecReplicas(allRSs)
		maxTotal := f.maxTotal()
		newSize := specReplicas(newRS)
		if current >= maxTotal {
			return newSize, nil
		}
		return newSize + min(maxTotal-current, f.replicas-newSize), nil
	default:
		return 0, unexpectedStrategyError(d)
	}
}

// Bounds returns the limits a rollout of d keeps, in replicas, as the
// controller resolves them: maxTotal = replicas + maxSurge (RU-10, PS-3) and
// minAvailable = replicas − maxUnavailable (RU-6, RU-11). For Recreate,
// maxTotal is replicas and minAvailable is replicas too (the Available
// condition's threshold, ST-4), though a Recreate rollout goes to 0 by
// design (RC-1). It returns an error when d's rollingUpdate maxSurge or
// maxUnavailable does not parse (VA-8); the bounds are then computed with
// the bad value as 0. `rollout watch --timeline` draws them.
func Bounds(d *appsv1.Deployment) (maxTotal, minAvailable int32, err error) {
	f, err := fencepostsOf(d)
	return f.maxTotal(), f.minAvailable(), err
}
