package shadow

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Bound names a rolling-update bound, the "bound" label of kubedeploy_shadow_bound_violations_total.
type Bound string

// The bounds the live controller's ReplicaSet writes are checked against during rollouts.
const (
	// BoundSurge: the ReplicaSets' spec.replicas add up to at most spec.replicas + maxSurge (RU-1, RU-7).
	BoundSurge Bound = "surge"
	// BoundAvailability: an old ReplicaSet's scale-down leaves at least spec.replicas − maxUnavailable pods
	// that are available or may become so: the ReplicaSets' spec.replicas less the new one's unavailable
	// (RU-10, RU-12).
	BoundAvailability Bound = "availability"
	// BoundPartition: with kubedeploy.io/rollout-partition (EX-1, which upstream ignores), the new ReplicaSet
	// grows past the partition while old ReplicaSets still have replicas: kubedeploy would have held there.
	BoundPartition Bound = "partition"
)

// Bounds lists every Bound (the metric's label values).
var Bounds = []Bound{BoundSurge, BoundAvailability, BoundPartition}

// Violation is a ReplicaSet write that broke a bound of its Deployment's rolling update.
type Violation struct {
	Bound Bound
	// ReplicaSet is the ReplicaSet written; Detail says what the bound and the replicas were.
	ReplicaSet string
	Detail     string
}

// CheckBounds returns the bounds Deployment d's rolling update breaks when its ReplicaSet changed from old to
// cur (spec.replicas), rss being d's ReplicaSets as they are now (cur among them). Only a RollingUpdate
// Deployment that is not paused, whose controller observed its generation and whose ReplicaSet carries
// d's spec.replicas in deployment.kubernetes.io/desired-replicas (not a scaling, which proportional scaling
// sizes by other rules) is checked; a spec.replicas that did not change breaks nothing.
func CheckBounds(d *appsv1.Deployment, old, cur *appsv1.ReplicaSet, rss []*appsv1.ReplicaSet) []Violation {
	f, err := rolloutstate.FencepostsOf(d)
	oldSize, size := rolloutstate.ReplicaSetReplicas(old), rolloutstate.ReplicaSetReplicas(cur)
	if err != nil || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Paused ||
		d.Status.ObservedGeneration < d.Generation || oldSize == size ||
		cur.Annotations[rolloutstate.DesiredReplicasAnnotation] != fmt.Sprint(f.Replicas) {
		return nil
	}
	newRS := rolloutstate.NewReplicaSet(d, rss)
	var total, oldTotal int32
	for _, rs := range rss {
		total += rolloutstate.ReplicaSetReplicas(rs)
		if newRS == nil || rs.UID != newRS.UID {
			oldTotal += rolloutstate.ReplicaSetReplicas(rs)
		}
	}
	var out []Violation
	if size > oldSize && total > f.MaxTotal() {
		out = append(out, Violation{Bound: BoundSurge, ReplicaSet: cur.Name,
			Detail: fmt.Sprintf("spec.replicas %d→%d makes %d replicas, above %d (replicas + maxSurge)", oldSize, size, total, f.MaxTotal())})
	}
	isNew := newRS != nil && cur.UID == newRS.UID
	if size < oldSize && !isNew && newRS != nil {
		newUnavailable := max(0, rolloutstate.ReplicaSetReplicas(newRS)-newRS.Status.AvailableReplicas)
		if left := total - newUnavailable; left < f.MinAvailable() {
			out = append(out, Violation{Bound: BoundAvailability, ReplicaSet: cur.Name,
				Detail: fmt.Sprintf("spec.replicas %d→%d leaves %d replicas that are or may become available, below %d (replicas − maxUnavailable)", oldSize, size, left, f.MinAvailable())})
		}
	}
	if p, err := rolloutstate.PartitionOf(d); err == nil && isNew && size > oldSize {
		if limit := p.LimitFor(oldSize, oldTotal); size > limit {
			out = append(out, Violation{Bound: BoundPartition, ReplicaSet: cur.Name,
				Detail: fmt.Sprintf("the new ReplicaSet grew %d→%d past the partition %s (%d) while old ReplicaSets have %d replicas",
					oldSize, size, d.Annotations[rolloutstate.RolloutPartitionAnnotation], limit, oldTotal)})
		}
	}
	return out
}
