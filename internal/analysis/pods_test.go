package analysis

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pod returns a pod whose Ready condition is ready, with one container and one init container restarted
// restarts and initRestarts times.
func pod(ready bool, restarts, initRestarts int32) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{Status: corev1.PodStatus{
		Conditions:            []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: status}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", RestartCount: restarts}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar", RestartCount: initRestarts}},
	}}
}

// EX-6's pods provider: ready and not ready pods, restarts summed over containers and init containers, pods
// being deleted and nil pods left out.
func TestPodsResultOf(t *testing.T) {
	deleting := pod(false, 9, 0)
	deleting.DeletionTimestamp = &metav1.Time{}
	noConditions := &corev1.Pod{}
	cases := []struct {
		name string
		pods []*corev1.Pod
		want PodsResult
	}{
		{"none", nil, PodsResult{}},
		{"all ready", []*corev1.Pod{pod(true, 0, 0), pod(true, 0, 0)}, PodsResult{Ready: 2, Total: 2}},
		{"one not ready, restarts summed", []*corev1.Pod{pod(true, 2, 1), pod(false, 3, 0)}, PodsResult{Ready: 1, NotReady: 1, Restarts: 6, Total: 2}},
		{"no conditions is not ready", []*corev1.Pod{noConditions}, PodsResult{NotReady: 1, Total: 1}},
		{"deleting and nil skipped", []*corev1.Pod{pod(true, 0, 0), deleting, nil}, PodsResult{Ready: 1, Total: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodsResultOf(tc.pods); got != tc.want {
				t.Errorf("PodsResultOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
