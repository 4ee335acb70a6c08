package analysis

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// PodsResult is the pods provider's result (EX-6): counts over the new ReplicaSet's pods that are not being
// deleted. Conditions read it as `result.ready`, `result.notReady`, `result.restarts`, `result.total` (CEL
// ints), e.g. `result.restarts == 0 && result.notReady == 0`.
type PodsResult struct {
	// Ready is the pods whose Ready condition is True; NotReady the others; Total both.
	Ready, NotReady, Total int64
	// Restarts is the sum of the restartCount of the pods' container statuses and init container statuses
	// (sidecars restart; an init container that failed and ran again counts too). On the controllers'
	// slimmed pod cache (podcache.Slim keeps only the regular container with the most restarts) it is a lower
	// bound of the true sum, and exact when 0.
	Restarts int64
}

// PodsResultOf counts pods, skipping nil pods and pods with a deletionTimestamp (a scale-down's victims are
// not the version's fault).
func PodsResultOf(pods []*corev1.Pod) PodsResult {
	var r PodsResult
	for _, p := range pods {
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		r.Total++
		if podReady(p) {
			r.Ready++
		} else {
			r.NotReady++
		}
		for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
			for _, cs := range statuses {
				r.Restarts += int64(cs.RestartCount)
			}
		}
	}
	return r
}

// podReady is whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	c := rolloutstate.PodCondition(pod, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// String is r as Measurement.Value shows it: "ready=3 notReady=0 restarts=0 total=3".
func (r PodsResult) String() string {
	return fmt.Sprintf("ready=%d notReady=%d restarts=%d total=%d", r.Ready, r.NotReady, r.Restarts, r.Total)
}

// celValue is r as CEL's `result`: a map of int64s.
func (r PodsResult) celValue() map[string]any {
	return map[string]any{"ready": r.Ready, "notReady": r.NotReady, "restarts": r.Restarts, "total": r.Total}
}
