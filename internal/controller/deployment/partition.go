package deployment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// InvalidRolloutPartition is the Warning event reason for a
// rolloutstate.RolloutPartitionAnnotation value that does not parse; the rollout then
// holds where it is, as for a partition of 0 (EX-1).
const InvalidRolloutPartition = "InvalidRolloutPartition"

// ParsePartition returns the number of pods, in [0, replicas], that
// partition value v allows on the new template of a Deployment of replicas
// replicas (EX-1): "N" is N, capped at replicas; "N%" is N percent of
// replicas rounded down, capped at replicas. N is a decimal integer ≥ 0;
// anything else (a sign, spaces, a fraction, an empty string, an overflow)
// is an error naming the value. replicas < 0 counts as 0.
func ParsePartition(v string, replicas int32) (int32, error) {
	replicas = max(replicas, 0)
	digits, percent := strings.CutSuffix(v, "%")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%s %q: want a whole number of pods (\"5\") or a percentage of spec.replicas (\"25%%\")", rolloutstate.RolloutPartitionAnnotation, v)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		// Only an overflow gets here: more than any Deployment has.
		n = math.MaxInt64
	}
	if percent {
		if n >= 100 {
			return replicas, nil
		}
		return int32(n * int64(replicas) / 100), nil
	}
	return int32(min(n, int64(replicas))), nil
}

// rolloutPartition is a Deployment's EX-1 partition, read once per sync by
// partitionOf. set is true for a RollingUpdate Deployment with the
// rolloutstate.RolloutPartitionAnnotation (a Recreate Deployment ignores
// it); pods is then the partition in pods, in [0, replicas], and 0 for a
// value that does not parse (hold where it is); replicas is d.spec.replicas.
// The zero value is no partition.
type rolloutPartition struct {
	set      bool
	pods     int32
	replicas int32
}

// partitionOf reads d's partition (EX-1). err is the parse error of an
// invalid annotation (see ParsePartition); the partition returned with it
// holds at 0 pods.
func partitionOf(d *appsv1.Deployment) (rolloutPartition, error) {
	p := rolloutPartition{replicas: desiredReplicas(d)}
	v, ok := d.Annotations[rolloutstate.RolloutPartitionAnnotation]
	if !ok || !isRollingUpdate(d) {
		return p, nil
	}
	p.set = true
	pods, err := ParsePartition(v, p.replicas)
	p.pods = pods
	return p, err
}

// newReplicaSetLimit returns the most replicas the rolling update may give
// the new ReplicaSet newRS (nil: none yet), in replicas: the partition, but
// never less than newRS already has and never more than d.spec.replicas.
// Without a partition, or when no other ReplicaSet in allRSs has replicas (a
// first rollout has no old template to keep pods on), there is no limit:
// math.MaxInt32.
func (p rolloutPartition) newReplicaSetLimit(newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) int32 {
	if !p.set {
		return math.MaxInt32
	}
	var old int32
	for _, rs := range allRSs {
		if rs != nil && (newRS == nil || rs.UID != newRS.UID) {
			old += specReplicas(rs)
		}
	}
	if old == 0 {
		return math.MaxInt32
	}
	return min(p.replicas, max(p.pods, specReplicas(newRS)))
}

// oldReplicasFloor returns how many replicas the old ReplicaSets keep in
// total while the new one may have at most limit (EX-1): d.spec.replicas −
// limit, 0 without a partition.
func oldReplicasFloor(replicas, limit int32) int32 { return max(0, replicas-limit) }

// heldAtPartition reports whether status shows d's rollout held by its
// partition (EX-1): limit < d.spec.replicas, the new ReplicaSet sized,
// updated and available at limit, the old ones at the rest, every pod
// available, for the current generation. It is the partitioned counterpart
// of rolloutstate.Complete (ST-9).
func heldAtPartition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, limit int32) bool {
	replicas := desiredReplicas(d)
	return limit < replicas && newRS != nil &&
		specReplicas(newRS) == limit && newRS.Status.AvailableReplicas >= limit &&
		status.UpdatedReplicas == limit &&
		status.Replicas == replicas &&
		status.AvailableReplicas == replicas &&
		status.ObservedGeneration >= d.Generation
}

// partitionMessage is the rolloutstate.RolloutPartitioned condition message.
func partitionMessage(subject string, updated, replicas int32) string {
	return fmt.Sprintf("%s has %d of %d pods updated, held by %s.", subject, updated, replicas, rolloutstate.RolloutPartitionAnnotation)
}

// limitScaling limits the new ReplicaSet's size in sizes, a proportional
// scaling plan (PS-3..PS-6), to newReplicaSetLimit, and gives the replicas
// it takes off to the first old ReplicaSet in sizes, so that the plan's
// total is unchanged: scaling a partitioned Deployment keeps the new
// ReplicaSet at min(partition, replicas). Without a partition, or without
// an old ReplicaSet in sizes, sizes is returned as is.
func (p rolloutPartition) limitScaling(newRS *appsv1.ReplicaSet, sizes plan) plan {
	if newRS == nil || !p.set {
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
