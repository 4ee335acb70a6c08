package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// rolloutRolling is one pass of a rolling update (RU-8..RU-13): ensure the
// new ReplicaSet exists, then either scale it, or scale old ReplicaSets down,
// or clean up history, and always sync the rollout status.
func (sc *syncContext) rolloutRolling(ctx context.Context) (runner.Result, error) {
	if err := sc.ensureNewReplicaSet(ctx); err != nil {
		return runner.Result{}, err
	}
	scaled, err := sc.reconcileNewReplicaSet(ctx)
	if err != nil {
		return runner.Result{}, err
	}
	if scaled {
		return sc.syncRolloutStatus(ctx)
	}
	scaled, err = sc.reconcileOldReplicaSets(ctx)
	if err != nil {
		return runner.Result{}, err // IM-1: never swallowed
	}
	if scaled {
		return sc.syncRolloutStatus(ctx)
	}
	if rolloutstate.Complete(sc.d, &sc.d.Status) {
		if err := sc.cleanupDeployment(ctx); err != nil {
			return runner.Result{}, err
		}
	}
	return sc.syncRolloutStatus(ctx)
}

// reconcileNewReplicaSet scales the new ReplicaSet toward d.spec.replicas
// within the surge budget (RU-9, RU-10), with TerminationComplete within
// the pod-level budget too (EX-3), and with a partition no further than it
// allows (EX-1), and reports whether it wrote.
func (sc *syncContext) reconcileNewReplicaSet(ctx context.Context) (bool, error) {
	replicas := sc.f.Replicas
	current := specReplicas(sc.newRS)
	if current == replicas {
		return false, nil
	}
	if current > replicas {
		return sc.scaleReplicaSet(ctx, sc.newRS, replicas)
	}
	size, err := sc.newReplicaSetSize()
	if err != nil || size <= current {
		return false, err
	}
	return sc.scaleReplicaSet(ctx, sc.newRS, size)
}

// newReplicaSetSize returns the size the new ReplicaSet (sc.newRS; nil: not
// created yet, size 0) may grow to in this pass, in replicas, never below
// its current size: RU-10's surge bound over ReplicaSet specs
// (newRSNewReplicas), within the pod-level bound under TerminationComplete
// (EX-3, newRSSizeWithinPods) and the partition (EX-1). This is the one
// place the three bounds meet. It returns newRSNewReplicas' error for an
// unknown strategy, or the pod cache's (EX-3 reads it).
func (sc *syncContext) newReplicaSetSize() (int32, error) {
	size, err := newRSNewReplicas(sc.d, sc.f, sc.allRSs(), sc.newRS)
	if err != nil {
		return 0, err
	}
	if size, err = sc.newRSSizeWithinPods(size); err != nil {
		return 0, err
	}
	return min(size, sc.partition.newReplicaSetLimit(sc.newRS, sc.allRSs())), nil
}

// maxScaledDown returns how many old replicas may be removed now without
// going below f.MinAvailable(), counting the new ReplicaSet's unavailable
// replicas as already missing (RU-11); ≤ 0 means none.
func maxScaledDown(f rolloutstate.Fenceposts, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	newRSUnavailable := int32(0)
	if newRS != nil {
		newRSUnavailable = specReplicas(newRS) - newRS.Status.AvailableReplicas
	}
	return sumSpecReplicas(allRSs) - f.MinAvailable() - newRSUnavailable
}

// reconcileOldReplicaSets scales old ReplicaSets down (RU-11): first their
// unhealthy replicas, then healthy ones as availability allows, each write
// conditioned on the availability it read. Unlike upstream, any failed write
// is returned (IM-1). It reports whether it wrote.
func (sc *syncContext) reconcileOldReplicaSets(ctx context.Context) (bool, error) {
	activeOld := activeReplicaSets(sc.oldRSs)
	if sumSpecReplicas(activeOld) == 0 {
		return false, nil
	}
	budget := maxScaledDown(sc.f, sc.allRSs(), sc.newRS)
	if budget <= 0 {
		return false, nil
	}
	// EX-1: the old ReplicaSets keep what the partition leaves them.
	floor := oldReplicasFloor(sc.f.Replicas, sc.partition.newReplicaSetLimit(sc.newRS, sc.allRSs()))
	partitionBudget := sumSpecReplicas(activeOld) - floor
	if partitionBudget <= 0 {
		return false, nil
	}
	sc.logger.V(4).Info("Found old replica sets to scale down", "maxScaledDown", budget)
	cleaned, err := sc.applyScaleDowns(ctx, unhealthyScaleDowns(activeOld, min(budget, partitionBudget)))
	if err != nil {
		return cleaned > 0, err
	}
	// Step B reads the ReplicaSets as step A left them (IM-2).
	activeOld = activeReplicaSets(sc.oldRSs)
	scaledDown, err := sc.applyScaleDowns(ctx, healthyScaleDowns(sc.f, activeOld, withNew(activeOld, sc.newRS), partitionBudget-cleaned))
	return cleaned+scaledDown > 0, err
}

// unhealthyScaleDowns returns the plan that removes unavailable replicas of
// active old ReplicaSets, oldest first, at most budget in total (RU-11 step
// A). A ReplicaSet whose available count is at or above its size has
// nothing unhealthy (upstream errors when available > size).
func unhealthyScaleDowns(activeOld []*appsv1.ReplicaSet, budget int32) plan {
	return oldestFirst(activeOld, budget, func(rs *appsv1.ReplicaSet) int32 {
		return max(0, specReplicas(rs)-rs.Status.AvailableReplicas)
	})
}

// healthyScaleDowns returns the plan that removes replicas of active old
// ReplicaSets, oldest first, while availability over allRSs stays at or
// above f.MinAvailable() (RU-11 step B), and no more than most in total (the
// partition's budget, EX-1; without a partition reconcileOldReplicaSets
// passes the old ReplicaSets' total, which never binds).
//
// Unlike upstream, availability is counted per ReplicaSet as at most its
// size (sumAvailableWithinSize): right after a scale-down, a ReplicaSet's
// cached status still counts pods its controller is about to delete, and
// counting them let a second pass scale old ReplicaSets down again below
// minAvailable (seen on the embedded control plane: old 10 with 15 available
// + new 15 with 8 available gave a budget of 8 instead of 3).
func healthyScaleDowns(f rolloutstate.Fenceposts, activeOld, allRSs []*appsv1.ReplicaSet, most int32) plan {
	budget := min(sumAvailableWithinSize(allRSs)-f.MinAvailable(), most)
	return oldestFirst(activeOld, budget, specReplicas)
}

// oldestFirst returns the plan that removes up to budget replicas in total
// (none when budget ≤ 0) from rss, oldest first, at most most(rs) (≥ 0,
// ≤ its size) from each; ReplicaSets it takes nothing from are left out.
func oldestFirst(rss []*appsv1.ReplicaSet, budget int32, most func(*appsv1.ReplicaSet) int32) plan {
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	sortOldestFirst(sorted)
	var out plan
	for _, rs := range sorted {
		n := min(budget, most(rs))
		if n <= 0 {
			continue
		}
		out = append(out, resize{rs: rs, size: specReplicas(rs) - n})
		budget -= n
	}
	return out
}
