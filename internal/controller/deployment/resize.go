package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// resize is one planned write: ReplicaSet rs to size replicas.
type resize struct {
	rs   *appsv1.ReplicaSet
	size int32
}

// plan is an ordered list of resizes, in the order they are written: the
// one shape of proportional scaling (PS-3..PS-6) and of the RU-11
// scale-downs. Each ReplicaSet appears at most once.
type plan []resize

// applyScaling writes p, a proportional scaling plan (PS-3..PS-6), in
// order with syncReplicaSetScale (size and desired/max annotations). It
// returns the first write error, which stops it (IM-1).
func (sc *syncContext) applyScaling(ctx context.Context, p plan) error {
	_, err := sc.apply(ctx, p, func(*appsv1.ReplicaSet) []jsonPatchOp { return nil })
	return err
}

// applyScaleDowns writes p, an RU-11 scale-down plan, in order with
// syncReplicaSetScale, each write conditioned on the ReplicaSet's
// status.availableReplicas still being what the plan read (RU-11 decisions
// read it; IM-2). It returns how many replicas the writes removed in total
// (in replicas) and the first write error, which stops it (IM-1).
func (sc *syncContext) applyScaleDowns(ctx context.Context, p plan) (int32, error) {
	return sc.apply(ctx, p, func(rs *appsv1.ReplicaSet) []jsonPatchOp { return []jsonPatchOp{availableUnchanged(rs)} })
}

// apply writes p in order, each resize with the patch tests that tests
// returns for its ReplicaSet; see applyScaling and applyScaleDowns.
func (sc *syncContext) apply(ctx context.Context, p plan, tests func(*appsv1.ReplicaSet) []jsonPatchOp) (int32, error) {
	var removed int32
	for _, r := range p {
		if _, err := sc.syncReplicaSetScale(ctx, r.rs, r.size, tests(r.rs)...); err != nil {
			return removed, err
		}
		removed += max(0, specReplicas(r.rs)-r.size)
	}
	return removed, nil
}

// scaleReplicaSet sets rs to size replicas unless it already has that size
// (RU-15 with force=false); see syncReplicaSetScale. It reports whether it wrote.
func (sc *syncContext) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, size int32) (bool, error) {
	if specReplicas(rs) == size {
		return false, nil
	}
	return sc.syncReplicaSetScale(ctx, rs, size)
}

// syncReplicaSetScale sets rs to size replicas and refreshes its desired/max
// annotations and, in the same write, its kubedeploy.io/ policy annotations
// (EX-0, setPolicyAnnotations), writing (patchReplicaSet, with the extra tests) only if one of
// them differs (RU-15 with force=true). A size change emits a Normal
// ScalingReplicaSet event "Scaled up|down replica set <rs> from <old> to
// <new>". It reports whether it wrote and returns the API error.
func (sc *syncContext) syncReplicaSetScale(ctx context.Context, rs *appsv1.ReplicaSet, size int32, tests ...jsonPatchOp) (bool, error) {
	oldSize := specReplicas(rs)
	desired, maxReplicas := sc.f.Replicas, sc.f.MaxTotal()
	if oldSize == size && !replicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false, nil
	}
	rsCopy := rs.DeepCopy()
	rsCopy.Spec.Replicas = &size
	setReplicasAnnotations(rsCopy, desired, maxReplicas)
	setPolicyAnnotations(sc.d, rsCopy)
	if _, err := sc.patchReplicaSet(ctx, rs, rsCopy, tests...); err != nil {
		return false, err
	}
	if oldSize != size {
		direction := "up"
		if size < oldSize {
			direction = "down"
		}
		sc.c.recorder.Eventf(sc.d, v1.EventTypeNormal, ScalingReplicaSet, "Scaled %s replica set %s from %d to %d", direction, rs.Name, oldSize, size)
		sc.logger.V(2).Info("Scaled replica set", "replicaSet", klog.KObj(rs), "from", oldSize, "to", size)
	}
	return true, nil
}
