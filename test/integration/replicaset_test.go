package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

func activePods(ctx context.Context, ns string, sel map[string]string) ([]v1.Pod, error) {
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// waitRSReady waits up to a minute (what names the wait) for ReplicaSet rs
// to have 3 active pods and a status, of its current generation, counting 3
// replicas, ready, available and fully labeled.
func waitRSReady(t *testing.T, rs *appsv1.ReplicaSet, what string) {
	t.Helper()
	ns := rs.Namespace
	harness.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
		got, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := activePods(ctx, ns, rs.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		s := got.Status
		return len(pods) == 3 && s.Replicas == 3 && s.ReadyReplicas == 3 && s.AvailableReplicas == 3 &&
			s.FullyLabeledReplicas == 3 && s.ObservedGeneration == got.Generation, nil
	})
}

// TestReplicaSetReplacesAndAdopts: the ReplicaSet controller keeps
// spec.replicas pods (RS-12, RS-13), replaces a deleted pod, adopts a matching
// orphan (AD-1, AD-4) and then deletes the surplus (RS-14), and reports
// status (RS-15, RS-16).
func TestReplicaSetReplacesAndAdopts(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rs, err := env.Client.AppsV1().ReplicaSets(ns).Create(ctx, harness.NewReplicaSet(ns, "web", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRSReady(t, rs, "3 ready pods")

	pods, err := activePods(ctx, ns, rs.Spec.Selector.MatchLabels)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "a replacement pod", func(ctx context.Context) (bool, error) {
		now, err := activePods(ctx, ns, rs.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		for _, p := range now {
			if p.Name == pods[0].Name {
				return false, nil
			}
		}
		return len(now) == 3, nil
	})
	waitRSReady(t, rs, "3 ready pods after a deletion")

	orphan := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1.9"}}},
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Adopted (or deleted as surplus right after adoption): either way it
	// must end up controlled by the ReplicaSet or gone, with 3 pods left.
	harness.Eventually(t, time.Minute, "the orphan to be adopted and the surplus removed", func(ctx context.Context) (bool, error) {
		now, err := activePods(ctx, ns, rs.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		for _, p := range now {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID {
				return false, nil
			}
		}
		return len(now) == 3, nil
	})
	waitRSReady(t, rs, "3 ready pods after adoption")
}
