package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestRolloverMidRollout (15.1 TestDeploymentRollingUpdate, second half;
// RU-8..RU-13): a template change while a rollout is under way (revision 3
// stuck on a broken image) rolls over to revision 4 within the surge and
// availability bounds, and every older ReplicaSet ends at 0.
func TestRolloverMidRollout(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "rollover", 4, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	waitRevision(t, ns, d.Name, "2")
	w := harness.WatchRollout(t, env.Client, ns, d.Name, harness.Bounds{MaxTotal: 5, MinAvailable: 3})
	setImage(ctx, t, ns, d.Name, d.Name, brokenImage)
	waitDeployment(t, ns, d.Name, "revision 3 under way", func(d *appsv1.Deployment) bool {
		return d.Annotations[revisionAnnotation] == "3" && d.Status.UpdatedReplicas > 0
	})
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.10")
	d = waitRevision(t, ns, d.Name, "4")
	w.Stop()
	w.Check(4)
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if rs.Annotations[revisionAnnotation] != "4" && (specOf(&rs) != 0 || rs.Status.Replicas != 0) {
			t.Errorf("old ReplicaSet %s (revision %s) at %d/%d, want 0/0", rs.Name, rs.Annotations[revisionAnnotation], specOf(&rs), rs.Status.Replicas)
		}
	}
}

// TestRecreateNeverMixesPods (15.2 conformance "RecreateDeployment should
// delete old pods and create new ones", RC-1..RC-8): during a Recreate
// rollout a pod watch never sees pods of the old and the new template at the
// same time (terminating pods count), the Deployment never reports updated
// replicas alongside others, and the rollout completes.
func TestRecreateNeverMixesPods(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, recreate(harness.NewDeployment(ns, "recreate", 3, "nginx:1.9")))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	oldHash := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0].Labels[hashLabel]
	mixed := watchMixedPods(ctx, t, ns, oldHash)
	dw, err := env.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: d.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	for ev := range dw.ResultChan() {
		got, ok := ev.Object.(*appsv1.Deployment)
		if !ok || ev.Type == watch.Error {
			t.Fatalf("deployment watch: %v", ev.Object)
		}
		s := got.Status
		if s.UpdatedReplicas > 0 && s.Replicas != s.UpdatedReplicas {
			t.Errorf("status shows old and new replicas together: replicas %d, updated %d", s.Replicas, s.UpdatedReplicas)
		}
		if got.Annotations[revisionAnnotation] == "2" && harness.DeploymentComplete(got) {
			break
		}
	}
	if m := mixed(); m != "" {
		t.Errorf("old and new pods coexisted: %s", m)
	}
}

// watchMixedPods watches pods in ns and returns a function describing the
// first moment pods with oldHash and pods with another hash both existed
// (any phase, terminating included), or "".
func watchMixedPods(ctx context.Context, t *testing.T, ns, oldHash string) func() string {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]string{}
	for _, p := range list.Items {
		live[p.Name] = p.Labels[hashLabel]
	}
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var first string
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(live, p.Name)
			} else {
				live[p.Name] = p.Labels[hashLabel]
			}
			old, other := 0, 0
			for _, h := range live {
				if h == oldHash {
					old++
				} else {
					other++
				}
			}
			if old > 0 && other > 0 && first == "" {
				first = fmt.Sprintf("%d old and %d new pods after %s of %s", old, other, ev.Type, p.Name)
			}
			mu.Unlock()
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
}

// TestDeploymentRollover (15.2 conformance "deployment should support
// rollover"): an adopted ReplicaSet (1 replica) plus a stuck new one (broken
// image; maxUnavailable 0, maxSurge 1, minReadySeconds 3) both hold 1; a
// template update then rolls over to revision 2 within the bounds (at most 2
// replicas, at least 1 available) and both older ReplicaSets end at 0.
func TestDeploymentRollover(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	pre := createReplicaSet(ctx, t, legacyReplicaSet(ns, "test-rollover", 1, "nginx:1.9"))
	waitReplicaSetAvailable(t, ns, pre.Name, 1)
	d := withStrategy(harness.NewDeployment(ns, "test-rollover", 1, brokenImage), 1, 0)
	d.Spec.Selector.MatchLabels = pre.Spec.Selector.MatchLabels
	d.Spec.Template.Labels = pre.Spec.Template.Labels
	d.Spec.MinReadySeconds = 3
	d = createDeployment(ctx, t, d)
	waitReplicaSets(t, d, "adopted and stuck ReplicaSets at 1 each", func(rss []appsv1.ReplicaSet) bool {
		return len(rss) == 2 && sizes(rss) == "[1 1]"
	})
	w := harness.WatchRollout(t, env.Client, ns, d.Name, harness.Bounds{MaxTotal: 2, MinAvailable: 1})
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	d = waitRevision(t, ns, d.Name, "2")
	w.Stop()
	w.Check(3)
	rss := waitReplicaSets(t, d, "older ReplicaSets at 0", func(rss []appsv1.ReplicaSet) bool {
		for _, rs := range rss {
			if rs.Annotations[revisionAnnotation] != "2" && (specOf(&rs) != 0 || rs.Status.Replicas != 0) {
				return false
			}
		}
		return true
	})
	if len(rss) != 3 {
		t.Errorf("%d ReplicaSets, want the adopted, the stuck and the new one", len(rss))
	}
}

// TestProportionalScaling (15.2 conformance "deployment should support
// proportional scaling", PS-7): 10 replicas, maxSurge 3, maxUnavailable 2,
// rolled to a broken image, stop at old 8 (8 available) and new 5 (none
// available); scaling to 30 gives old 20 and new 13, both annotated
// desired-replicas 30 and max-replicas 33.
func TestProportionalScaling(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	d := createDeployment(ctx, t, withStrategy(harness.NewDeployment(ns, "proportional", 10, "nginx:1.9"), 3, 2))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	setImage(ctx, t, ns, d.Name, d.Name, brokenImage)
	rss := waitReplicaSets(t, d, "old 8 (8 available) and new 5", func(rss []appsv1.ReplicaSet) bool {
		return len(rss) == 2 && sizes(rss) == "[5 8]" && availableBySize(rss) == "8:8 5:0"
	})
	old := rss[0]
	if specOf(&old) != 8 {
		old = rss[1]
	}
	scaleDeployment(ctx, t, ns, d.Name, 30)
	rss = waitReplicaSets(t, d, "old 20 and new 13", func(rss []appsv1.ReplicaSet) bool {
		return len(rss) == 2 && sizes(rss) == "[13 20]"
	})
	for _, rs := range rss {
		if (specOf(&rs) == 20) != (rs.UID == old.UID) {
			t.Errorf("ReplicaSet %s (revision %s) has %d replicas", rs.Name, rs.Annotations[revisionAnnotation], specOf(&rs))
		}
		if rs.Annotations[desiredAnnotation] != "30" || rs.Annotations[maxAnnotation] != "33" {
			t.Errorf("ReplicaSet %s annotations desired %q max %q, want 30 and 33", rs.Name, rs.Annotations[desiredAnnotation], rs.Annotations[maxAnnotation])
		}
	}
}

// availableBySize formats each ReplicaSet as spec:available, larger first.
func availableBySize(rss []appsv1.ReplicaSet) string {
	if len(rss) != 2 {
		return ""
	}
	a, b := rss[0], rss[1]
	if specOf(&a) < specOf(&b) {
		a, b = b, a
	}
	return fmt.Sprintf("%d:%d %d:%d", specOf(&a), a.Status.AvailableReplicas, specOf(&b), b.Status.AvailableReplicas)
}
