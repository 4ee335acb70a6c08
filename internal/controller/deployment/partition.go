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

// partitioned reports whether d is a RollingUpdate Deployment with a
// rolloutstate.RolloutPartitionAnnotation (EX-1).
func partitioned(d *appsv1.Deployment) bool {
	_, ok := d.Annotations[rolloutstate.RolloutPartitionAnnotation]
	return ok && isRollingUpdate(d)
}

// newReplicaSetLimit returns the most replicas d's rolling update may give
// the new ReplicaSet newRS (nil: none yet) under EX-1, in replicas: the
// partition, but never less than newRS already has and never more than
// d.spec.replicas; d.spec.replicas without a partition, or when no other
// ReplicaSet in allRSs has replicas (a first rollout has no old template to
// keep pods on). err is the parse error of an invalid annotation, which then
// counts as a partition of 0 (hold where it is).
func newReplicaSetLimit(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) (limit int32, err error) {
	replicas := desiredReplicas(d)
	if !partitioned(d) {
		return replicas, nil
	}
	var old int32
	for _, rs := range allRSs {
		if rs != nil && (newRS == nil || rs.UID != newRS.UID) {
			old += specReplicas(rs)
		}
	}
	if old == 0 {
		return replicas, nil
	}
	p, err := ParsePartition(d.Annotations[rolloutstate.RolloutPartitionAnnotation], replicas)
	return min(replicas, max(p, specReplicas(newRS))), err
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

// partitionScaling limits the new ReplicaSet's size in p, a proportional
// scaling plan (PS-3..PS-6), to newReplicaSetLimit under EX-1, and gives
// the replicas it takes off to the first old ReplicaSet in p, so that the
// plan's total is unchanged: scaling a partitioned Deployment keeps the new
// ReplicaSet at min(partition, replicas). Without a partition, or without
// an old ReplicaSet in p, p is returned as is.
func partitionScaling(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, p plan) plan {
	if newRS == nil || !partitioned(d) {
		return p
	}
	rss := make([]*appsv1.ReplicaSet, 0, len(p))
	for _, r := range p {
		rss = append(rss, r.rs)
	}
	limit, _ := newReplicaSetLimit(d, newRS, rss)
	newAt, oldAt := -1, -1
	for i, r := range p {
		switch {
		case r.rs.UID == newRS.UID:
			newAt = i
		case oldAt < 0:
			oldAt = i
		}
	}
	if newAt < 0 || oldAt < 0 || p[newAt].size <= limit {
		return p
	}
	out := append(plan(nil), p...)
	out[oldAt].size += out[newAt].size - limit
	out[newAt].size = limit
	return out
}
