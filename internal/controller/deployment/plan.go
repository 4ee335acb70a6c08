package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
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

// applyPlan writes p in order with syncReplicaSetScale (size and
// desired/max annotations), each write conditioned, when ifAvailable is set,
// on the ReplicaSet's status.availableReplicas still being what the plan read
// (RU-11 decisions read it; IM-2). It returns how many replicas the writes
// removed in total (shrinks only, in replicas) and the first write error,
// which stops it (IM-1).
func (sc *syncContext) applyPlan(ctx context.Context, p plan, ifAvailable bool) (int32, error) {
	var removed int32
	for _, r := range p {
		var tests []jsonPatchOp
		if ifAvailable {
			tests = append(tests, availableUnchanged(r.rs))
		}
		if _, err := sc.syncReplicaSetScale(ctx, r.rs, r.size, tests...); err != nil {
			return removed, err
		}
		removed += max(0, specReplicas(r.rs)-r.size)
	}
	return removed, nil
}
