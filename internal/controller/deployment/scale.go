package deployment

import (
	"context"
	"math"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// isScalingEvent reports whether d.spec.replicas differs from the
// desired-replicas annotation of any active ReplicaSet in allRSs (SD-12).
// ReplicaSets without a parseable annotation are ignored.
func isScalingEvent(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet) bool {
	for _, rs := range activeReplicaSets(allRSs) {
		if desired, ok := replicasAnnotation(rs, rolloutstate.DesiredReplicasAnnotation); ok && desired != desiredReplicas(d) {
			return true
		}
	}
	return false
}

// activeOrLatest returns the one ReplicaSet to scale when at most one is
// active (PS-1): the only active one; with none active, newRS or else the
// newest old one. It returns nil when more than one is active or there are
// no ReplicaSets. oldRSs is not modified.
func activeOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	active := activeReplicaSets(withNew(oldRSs, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		if len(oldRSs) == 0 {
			return nil
		}
		newest := append([]*appsv1.ReplicaSet(nil), oldRSs...)
		sortNewestFirst(newest)
		return newest[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// isSaturated reports whether newRS runs replicas (d.spec.replicas)
// available replicas and was last sized for that count (PS-2).
func isSaturated(replicas int32, newRS *appsv1.ReplicaSet) bool {
	if newRS == nil {
		return false
	}
	desired, ok := replicasAnnotation(newRS, rolloutstate.DesiredReplicasAnnotation)
	return ok && specReplicas(newRS) == replicas && desired == replicas && newRS.Status.AvailableReplicas == replicas
}

// replicaSetFraction returns how many replicas rs gains (negative: loses) in
// proportion to the Deployment's new maximum size (f.MaxTotal()) over the
// one rs was last sized for (its max-replicas annotation, else
// statusReplicas, the Deployment's status.replicas) (PS-5, PS-6):
// size × newMax / oldMax, rounded half away from zero, minus size. Upstream multiplies in int32, which wraps for large
// Deployments (25000 × 87500) and then writes negative sizes; here the
// product is int64 and the result is clamped to the int32 range (found by
// FuzzSyncDeploymentBadInput).
func replicaSetFraction(f rolloutstate.Fenceposts, statusReplicas int32, rs *appsv1.ReplicaSet) int32 {
	if f.Replicas == 0 {
		return -specReplicas(rs)
	}
	newMax := f.MaxTotal()
	oldMax, ok := replicasAnnotation(rs, rolloutstate.MaxReplicasAnnotation)
	if !ok || oldMax == 0 {
		oldMax = statusReplicas
		if oldMax == 0 {
			return 0
		}
	}
	size := int64(specReplicas(rs))
	scaled := int64(math.Round(float64(size*int64(newMax)) / float64(oldMax)))
	return clampInt32(scaled - size)
}

// clampInt32 returns n limited to the int32 range.
func clampInt32(n int64) int32 {
	return int32(max(math.MinInt32, min(n, math.MaxInt32)))
}

// replicaSetProportion returns rs's share of toAdd given added replicas
// already handed out (PS-4), in replicas; see replicaSetFraction for f and
// statusReplicas.
func replicaSetProportion(f rolloutstate.Fenceposts, statusReplicas int32, rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	if rs == nil || specReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(f, statusReplicas, rs)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

// proportionalSizes spreads the difference between the allowed total
// (f.MaxTotal(), or 0 for 0 replicas) and the current total over the active
// ReplicaSets in proportion to their size (PS-3..PS-6), returning the plan
// in write order, one resize per active ReplicaSet; statusReplicas is the
// Deployment's status.replicas (see replicaSetFraction). oldRSs must be
// newest first (PS-1) for toAdd == 0.
func proportionalSizes(f rolloutstate.Fenceposts, statusReplicas int32, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) plan {
	active := activeReplicaSets(withNew(oldRSs, newRS))
	if len(active) == 0 {
		return nil
	}
	var allowed int32
	if f.Replicas > 0 {
		allowed = f.MaxTotal()
	}
	toAdd := allowed - sumSpecReplicas(active)
	switch {
	case toAdd > 0:
		sortBySizeNewer(active)
	case toAdd < 0:
		sortBySizeOlder(active)
	}
	out := make(plan, 0, len(active))
	var added int32
	for _, rs := range active {
		size := specReplicas(rs)
		if toAdd != 0 {
			p := replicaSetProportion(f, statusReplicas, rs, toAdd, added)
			size += p
			added += p
		}
		out = append(out, resize{rs: rs, size: size})
	}
	out[0].size = max(0, out[0].size+toAdd-added)
	return out
}

// scale resizes the ReplicaSets to a new d.spec.replicas (section 4): the
// single active (or latest) ReplicaSet takes all replicas (PS-1); a saturated
// new ReplicaSet zeroes the old ones (PS-2); otherwise RollingUpdate scales
// proportionally (PS-3), the new ReplicaSet no further than its partition
// (EX-1), and Recreate scales the surviving ReplicaSet (IM-3).
func (sc *syncContext) scale(ctx context.Context) error {
	replicas := sc.f.Replicas
	if rs := activeOrLatest(sc.newRS, sc.oldRSs); rs != nil {
		if specReplicas(rs) == replicas {
			return nil
		}
		_, err := sc.scaleReplicaSet(ctx, rs, replicas)
		return err
	}
	if isSaturated(replicas, sc.newRS) {
		for _, old := range activeReplicaSets(sc.oldRSs) {
			if _, err := sc.scaleReplicaSet(ctx, old, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if isRollingUpdate(sc.d) {
		oldNewestFirst := append([]*appsv1.ReplicaSet(nil), sc.oldRSs...)
		sortNewestFirst(oldNewestFirst)
		sizes := sc.partition.limitScaling(sc.newRS, proportionalSizes(sc.f, sc.d.Status.Replicas, sc.newRS, oldNewestFirst)) // EX-1
		return sc.applyScaling(ctx, sizes)
	}
	return sc.scaleRecreate(ctx)
}

// scaleRecreate applies a scaling event to a Recreate Deployment with more
// than one active ReplicaSet (IM-3; upstream does nothing, NA-4): the new
// ReplicaSet, which survives the rollout, gets d.spec.replicas if it is
// active; every other active ReplicaSet keeps its size but gets fresh
// desired/max annotations, so the scaling event is consumed and the Recreate
// rollout (which zeroes them) can proceed.
func (sc *syncContext) scaleRecreate(ctx context.Context) error {
	for _, rs := range activeReplicaSets(sc.allRSs()) {
		size := specReplicas(rs)
		if sc.newRS != nil && rs.UID == sc.newRS.UID {
			size = sc.f.Replicas
		}
		if _, err := sc.syncReplicaSetScale(ctx, rs, size); err != nil {
			return err
		}
	}
	return nil
}
