package shadow

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Settled reports whether Deployment d, with rss (the ReplicaSets it controls) and pods (theirs), is at a
// state the live controllers have finished with, so that a faithful controller would write nothing there
// (issue 25): d not being deleted; its observedGeneration at its generation; every ReplicaSet's
// observedGeneration at its generation and its status (replicas, readyReplicas, availableReplicas at now, by
// its minReadySeconds) equal to its spec.replicas and its pods; no pod terminating; d's status equal to the
// sum of its ReplicaSets'; and the rollout complete (ST-9), paused, held at a partition (EX-1) or past its
// progress deadline (ST-13). When it is not, the reason names the first thing that is not so.
func Settled(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*v1.Pod, now time.Time) (bool, string) {
	return settled(d, rss, rolloutstate.NewReplicaSet(d, rss), pods, now)
}

// settled is Settled with newRS, d's new ReplicaSet among rss as the controller finds it (the Checker's
// rawtemplate store counts the templates' unknown fields, IM-8).
func settled(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, pods []*v1.Pod, now time.Time) (bool, string) {
	if why := unsettledDeployment(d, rss); why != "" {
		return false, why
	}
	byRS := map[types.UID][]*v1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			return false, "pod " + p.Name + " is terminating"
		}
		if owner, ok := ownership.ControllerUID(p); ok {
			byRS[owner] = append(byRS[owner], p)
		}
	}
	for _, rs := range rss {
		if why := replicaSetSettled(rs, byRS[rs.UID], now); why != "" {
			return false, "ReplicaSet " + rs.Name + ": " + why
		}
	}
	// The Deployment controller's own sums (ST-2), as a deliberate cross-check of what the live controller wrote.
	sum := rolloutstate.ReplicaCounts(rss, newRS)
	st := d.Status
	if st.Replicas != sum.Replicas || st.ReadyReplicas != sum.ReadyReplicas || st.AvailableReplicas != sum.AvailableReplicas || st.UpdatedReplicas != sum.UpdatedReplicas {
		return false, fmt.Sprintf("status (replicas %d, ready %d, available %d, updated %d) is not its ReplicaSets' (%d, %d, %d, %d)",
			st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas, sum.Replicas, sum.ReadyReplicas, sum.AvailableReplicas, sum.UpdatedReplicas)
	}
	return true, ""
}

// unsettledDeployment returns why d is not settled from d and its ReplicaSets alone (being deleted, its
// generation not observed, its rollout in progress), or "": the part of Settled that needs no pod, which
// Checker.Check tries first, since during a rollout it alone answers.
func unsettledDeployment(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) string {
	switch {
	case d.DeletionTimestamp != nil:
		return "the Deployment is being deleted"
	case d.Status.ObservedGeneration < d.Generation:
		return fmt.Sprintf("observedGeneration %d < generation %d", d.Status.ObservedGeneration, d.Generation)
	case d.Spec.Paused, rolloutstate.DeadlineExceeded(&d.Status), rolloutstate.Complete(d, &d.Status):
		return ""
	}
	switch v := rolloutstate.VerdictOf(d, rss); v.Phase {
	case rolloutstate.PhaseHeld, rolloutstate.PhaseInvalid:
		return ""
	default:
		return "the rollout is " + v.Summary
	}
}

// replicaSetSettled returns "" when rs's status is its spec's and its pods', else what differs.
func replicaSetSettled(rs *appsv1.ReplicaSet, pods []*v1.Pod, now time.Time) string {
	if rs.DeletionTimestamp != nil {
		return "being deleted"
	}
	if rs.Status.ObservedGeneration < rs.Generation {
		return fmt.Sprintf("observedGeneration %d < generation %d", rs.Status.ObservedGeneration, rs.Generation)
	}
	var active, ready, available int32
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for _, p := range pods {
		if p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
			continue
		}
		active++
		if _, ok := rolloutstate.PodReadySince(p); ok {
			ready++
		}
		// The ReplicaSet controller's own rule (RS-15): this re-sums status as a deliberate cross-check of
		// what the live controller wrote, with the same rule, not a second one.
		if rolloutstate.PodAvailable(p, minReady, now) {
			available++
		}
	}
	spec := rolloutstate.ReplicaSetReplicas(rs)
	st := rs.Status
	if st.Replicas != spec || active != spec || st.ReadyReplicas != ready || st.AvailableReplicas != available {
		return fmt.Sprintf("spec.replicas %d, status (replicas %d, ready %d, available %d), pods (active %d, ready %d, available %d)",
			spec, st.Replicas, st.ReadyReplicas, st.AvailableReplicas, active, ready, available)
	}
	return ""
}
