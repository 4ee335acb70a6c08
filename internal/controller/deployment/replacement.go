package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// waitsForTermination reports whether d is a rolling Deployment opted into
// TerminationComplete (EX-3).
func waitsForTermination(d *appsv1.Deployment) bool {
	return isRollingUpdate(d) && d.Annotations[rolloutstate.PodReplacementPolicyAnnotation] == rolloutstate.PodReplacementTerminationComplete
}

// podFootprint returns the most pods rs can hold before its controller has
// caught up, in pods: its live pods plus the creations its controller has in
// flight (pending, not yet in the pod cache), or its spec when more will be
// created, or its reported status.replicas, whichever is largest, plus its
// terminating pods (from the pod cache or its status, whichever is larger).
// Taking the largest of each makes a lagging cache or status count too many
// pods, never too few; counting pending creations keeps a ReplicaSet lowered
// below pods still being created from looking smaller than it will be.
func podFootprint(rs *appsv1.ReplicaSet, pods []*v1.Pod, pending int) int64 {
	var live, terminating int64
	for _, p := range pods {
		switch {
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		case p.DeletionTimestamp != nil:
			terminating++
		default:
			live++
		}
	}
	if rs.Status.TerminatingReplicas != nil {
		terminating = max(terminating, int64(*rs.Status.TerminatingReplicas))
	}
	return max(int64(specReplicas(rs)), live+int64(max(0, pending)), int64(rs.Status.Replicas)) + terminating
}

// terminationHeadroom returns how many pods may still be added under
// TerminationComplete: f.MaxTotal() (replicas + maxSurge) minus the
// footprint of every ReplicaSet in allRSs (podsByRS and pendingByRS, the
// creations in flight, keyed by ReplicaSet UID). It is negative while
// terminating pods hold the Deployment above its bound (EX-3).
func terminationHeadroom(f rolloutstate.Fenceposts, allRSs []*appsv1.ReplicaSet, podsByRS map[types.UID][]*v1.Pod, pendingByRS map[types.UID]int) int64 {
	footprint := int64(0)
	for _, rs := range allRSs {
		if rs != nil {
			footprint += podFootprint(rs, podsByRS[rs.UID], pendingByRS[rs.UID])
		}
	}
	return int64(f.MaxTotal()) - footprint
}

// newRSSizeWithinPods limits size, the new ReplicaSet's next size from
// RU-10, so that it grows by no more than terminationHeadroom when d is
// opted into TerminationComplete (EX-3); it never shrinks the new
// ReplicaSet below its current size. Without the annotation it returns size; the error is podMap's.
func (sc *syncContext) newRSSizeWithinPods(size int32) (int32, error) {
	current := specReplicas(sc.newRS)
	if !waitsForTermination(sc.d) || size <= current {
		return size, nil
	}
	pods, err := sc.podMap()
	if err != nil {
		return 0, err
	}
	headroom := terminationHeadroom(sc.f, sc.allRSs(), pods, sc.pendingByRS)
	capped := clampInt32(min(int64(size), int64(current)+max(0, headroom)))
	if capped < size {
		sc.logger.V(2).Info("Waiting for terminating pods before scaling up the new replica set",
			"policy", rolloutstate.PodReplacementTerminationComplete, "wanted", size, "scalingTo", capped, "headroom", headroom)
	}
	return capped, nil
}
