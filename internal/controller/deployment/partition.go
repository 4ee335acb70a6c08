package deployment

import (
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// InvalidRolloutPartition is the Warning event reason for a
// rolloutstate.RolloutPartitionAnnotation value that does not parse; the
// rollout then holds where it is, as for a partition of 0 (EX-1). It is also
// the reason of the Progressing=False condition meanwhile.
const InvalidRolloutPartition = rolloutstate.InvalidRolloutPartition

// rolloutPartition is a Deployment's EX-1 partition, read once per sync
// (rolloutstate.PartitionOf); the zero value is no partition.
type rolloutPartition struct {
	rolloutstate.Partition
	// invalid is the annotation's error when its value does not parse; the
	// partition then holds at 0 pods, i.e. where the rollout is.
	invalid *rolloutstate.PolicyError
	// steps, when set, are the rollout steps (EX-5) the partition comes from
	// (syncSteps): they, not EX-1, say how it holds the rollout.
	steps *rolloutSteps
}

// partitionOf reads d's partition (EX-1); see rolloutstate.PartitionOf.
func partitionOf(d *appsv1.Deployment) rolloutPartition {
	p, err := rolloutstate.PartitionOf(d)
	return rolloutPartition{Partition: p, invalid: err}
}

// newReplicaSetLimit is rolloutstate.Partition.Limit: the most replicas the
// rolling update may give newRS (EX-1), math.MaxInt32 for none.
func (p rolloutPartition) newReplicaSetLimit(newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) int32 {
	return p.Limit(newRS, allRSs)
}

// oldReplicasFloor returns how many replicas the old ReplicaSets keep in
// total while the new one may have at most limit (EX-1): d.spec.replicas −
// limit, 0 without a partition.
func oldReplicasFloor(replicas, limit int32) int32 { return max(0, replicas-limit) }

// limitScaling limits the new ReplicaSet's size in sizes, a proportional
// scaling plan (PS-3..PS-6), to newReplicaSetLimit, and gives the replicas
// it takes off to the first old ReplicaSet in sizes, so that the plan's
// total is unchanged: scaling a partitioned Deployment keeps the new
// ReplicaSet at min(partition, replicas). Without a partition, or without
// an old ReplicaSet in sizes, sizes is returned as is.
func (p rolloutPartition) limitScaling(newRS *appsv1.ReplicaSet, sizes plan) plan {
	if newRS == nil || !p.Set {
		return sizes
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(sizes))
	for _, r := range sizes {
		rss = append(rss, r.rs)
	}
	limit := p.newReplicaSetLimit(newRS, rss)
	newAt, oldAt := -1, -1
	for i, r := range sizes {
		switch {
		case r.rs.UID == newRS.UID:
			newAt = i
		case oldAt < 0:
			oldAt = i
		}
	}
	if newAt < 0 || oldAt < 0 || sizes[newAt].size <= limit {
		return sizes
	}
	out := append(plan(nil), sizes...)
	out[oldAt].size += out[newAt].size - limit
	out[newAt].size = limit
	return out
}
