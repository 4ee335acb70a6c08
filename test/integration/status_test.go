package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestDeploymentScaleSubresource (15.1 and 15.2 conformance "working scale
// subresource", VA-15): GET scale matches spec and status; UpdateScale and a
// merge patch of the scale change spec.replicas, and the controller follows,
// down to 0.
func TestDeploymentScaleSubresource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "scalable", 1, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	deps := env.Client.AppsV1().Deployments(ns)
	sc, err := deps.GetScale(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 1 || sc.Status.Replicas != 1 {
		t.Fatalf("scale spec %d status %d, want 1 and 1", sc.Spec.Replicas, sc.Status.Replicas)
	}
	sc.Spec.Replicas = 2
	if _, err := deps.UpdateScale(ctx, d.Name, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScaled(t, ns, d.Name, 2)
	if _, err := deps.Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatal(err)
	}
	waitScaled(t, ns, d.Name, 4)
	zero := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if _, err := deps.UpdateScale(ctx, d.Name, zero, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScaled(t, ns, d.Name, 0)
}

// waitScaled waits for ns/name to be complete with n replicas and its one
// ReplicaSet to have spec n.
func waitScaled(t *testing.T, ns, name string, n int32) {
	t.Helper()
	d := waitDeployment(t, ns, name, "complete after scale", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == n && harness.DeploymentComplete(d)
	})
	rss := harness.OwnedReplicaSets(context.Background(), t, env.Client, d)
	if len(rss) != 1 || specOf(&rss[0]) != n {
		t.Fatalf("after scale to %d: ReplicaSets %s", n, sizes(rss))
	}
}

// TestTerminatingReplicasDeploymentStatus (15.1, ST-3, RS-5, gate
// DeploymentReplicaSetTerminatingReplicas on): pods on a node without a fake
// kubelet stay terminating after deletion, so scaling 4→1 shows
// terminatingReplicas 3 on the Deployment; once they are gone it is 0 again.
func TestTerminatingReplicasDeploymentStatus(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	node := unmanagedNode(ctx, t)
	t.Cleanup(func() { forceDeletePods(context.Background(), t, ns, node) })
	d := harness.NewDeployment(ns, "terminating", 4, "nginx:1.9")
	d.Spec.Template.Spec.NodeName = node
	d = createDeployment(ctx, t, d)
	waitDeployment(t, ns, d.Name, "4 replicas, none terminating", func(d *appsv1.Deployment) bool {
		return d.Status.Replicas == 4 && d.Status.TerminatingReplicas != nil && *d.Status.TerminatingReplicas == 0
	})
	scaleDeployment(ctx, t, ns, d.Name, 1)
	got := waitDeployment(t, ns, d.Name, "3 terminating replicas", func(d *appsv1.Deployment) bool {
		return observed(d) && d.Status.TerminatingReplicas != nil && *d.Status.TerminatingReplicas == 3
	})
	if got.Status.Replicas != 1 {
		t.Errorf("status.replicas = %d with 3 terminating, want 1 (terminating pods are not replicas)", got.Status.Replicas)
	}
	forceDeletePods(ctx, t, ns, node)
	waitDeployment(t, ns, d.Name, "no terminating replicas", func(d *appsv1.Deployment) bool {
		return d.Status.TerminatingReplicas != nil && *d.Status.TerminatingReplicas == 0
	})
}

// TestRecreateDeploymentForPodReplacement (15.1, RC-3, RC-4, RC-8, ST-3): a
// Recreate rollout does not create the new ReplicaSet while old pods are
// still terminating, reporting them in terminatingReplicas; once they are
// gone the pod-delete wake-up lets it create the new ReplicaSet and complete.
func TestRecreateDeploymentForPodReplacement(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	node := unmanagedNode(ctx, t)
	t.Cleanup(func() { forceDeletePods(context.Background(), t, ns, node) })
	d := recreate(harness.NewDeployment(ns, "recreate-terminating", 3, "nginx:1.9"))
	d.Spec.Template.Spec.NodeName = node
	d = createDeployment(ctx, t, d)
	waitDeployment(t, ns, d.Name, "3 replicas", func(d *appsv1.Deployment) bool { return d.Status.Replicas == 3 })
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeName = ""
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	})
	waitDeployment(t, ns, d.Name, "3 terminating old replicas", func(d *appsv1.Deployment) bool {
		return observed(d) && d.Status.TerminatingReplicas != nil && *d.Status.TerminatingReplicas == 3 && d.Status.Replicas == 0
	})
	// By the end of the barrier the controllers have handled every event
	// queued before it, with the old pods still terminating: a controller that
	// does not wait for them would have created the new ReplicaSet by now.
	barrier(ctx, t, ns)
	if rss := harness.OwnedReplicaSets(ctx, t, env.Client, d); len(rss) != 1 {
		t.Fatalf("%d ReplicaSets while old pods terminate, want only the old one", len(rss))
	}
	forceDeletePods(ctx, t, ns, node)
	got := waitRevision(t, ns, d.Name, "2")
	checkCounts(t, got, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3})
}

// TestRollingUpdateAndProportionalScalingForPodReplacement (15.1, PS-3..PS-5,
// OM-3, OM-4; numbers scaled down from upstream's 100/20 to 10/2): with
// maxSurge 2 and maxUnavailable 0 a rollout to a broken image holds old 10
// and new 2; scaling to 12 adds the 2 proportionally (to the old one here:
// round(10·14/12)=12) and annotates both desired 12, max 14, with revisions 1
// and 2 kept.
func TestRollingUpdateAndProportionalScalingForPodReplacement(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, withStrategy(harness.NewDeployment(ns, "surge", 10, "nginx:1.9"), 2, 0))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	setImage(ctx, t, ns, d.Name, d.Name, brokenImage)
	waitReplicaSets(t, d, "old 10 and new 2", func(rss []appsv1.ReplicaSet) bool { return sizes(rss) == "[2 10]" })
	scaleDeployment(ctx, t, ns, d.Name, 12)
	rss := waitReplicaSets(t, d, "old 12 and new 2", func(rss []appsv1.ReplicaSet) bool {
		for _, rs := range rss {
			if rs.Annotations[desiredAnnotation] != "12" {
				return false
			}
		}
		return sizes(rss) == "[2 12]"
	})
	for _, rs := range rss {
		want := map[int32]string{12: "1", 2: "2"}[specOf(&rs)]
		if rs.Annotations[maxAnnotation] != "14" || rs.Annotations[revisionAnnotation] != want {
			t.Errorf("ReplicaSet %s: max-replicas %q revision %q, want 14 and %s", rs.Name, rs.Annotations[maxAnnotation], rs.Annotations[revisionAnnotation], want)
		}
	}
}

// TestDeploymentLifecycle (15.2 conformance "should run the lifecycle of a
// Deployment", ST-20): create, strategic-merge patch (replicas, image,
// labels), list by label, full update, a status patch zeroing ready and
// available that the controller restores, delete collection.
func TestDeploymentLifecycle(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	deps := env.Client.AppsV1().Deployments(ns)
	d := harness.NewDeployment(ns, "lifecycle", 2, "nginx:1.9")
	d.Labels = map[string]string{"test-deployment-static": "true"}
	d = createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	patch := `{"metadata":{"labels":{"test-deployment":"patched"}},"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"lifecycle","image":"nginx:1.9.3"}]}}}}`
	if _, err := deps.Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitRevision(t, ns, d.Name, "2")
	if got.Status.ReadyReplicas != 1 || got.Status.UpdatedReplicas != 1 || got.Status.UnavailableReplicas != 0 {
		t.Errorf("after patch: ready %d updated %d unavailable %d", got.Status.ReadyReplicas, got.Status.UpdatedReplicas, got.Status.UnavailableReplicas)
	}
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: "test-deployment-static=true"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list by label: %d items, %v", len(list.Items), err)
	}
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Labels["test-deployment"] = "updated"
		d.Spec.Replicas = new(int32(2))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.10"
	})
	waitRevision(t, ns, d.Name, "3")
	if _, err := deps.Patch(ctx, d.Name, types.MergePatchType, []byte(`{"status":{"readyReplicas":0,"availableReplicas":0}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	// Any Deployment event makes the controller recompute the status.
	waitDeployment(t, ns, d.Name, "status restored", func(d *appsv1.Deployment) bool {
		return d.Status.ReadyReplicas == 2 && d.Status.AvailableReplicas == 2
	})
	if err := deps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "test-deployment-static=true"}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, rolloutTimeout, "the deployment to be gone", func(ctx context.Context) (bool, error) {
		l, err := deps.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
}

// TestDeploymentStatusEndpoints (15.2 conformance "should validate Deployment
// Status endpoints", ST-4, ST-20): GET /status, UpdateStatus adding a custom
// condition and a merge patch adding another; both survive later controller
// status writes.
func TestDeploymentStatusEndpoints(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	deps := env.Client.AppsV1().Deployments(ns)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "status", 1, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	st, err := env.Client.AppsV1().RESTClient().Get().Namespace(ns).Resource("deployments").Name(d.Name).SubResource("status").Do(ctx).Get()
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	if got, ok := st.(*appsv1.Deployment); !ok || got.Name != d.Name {
		t.Fatalf("GET /status returned %T", st)
	}
	now := metav1.Now()
	cur, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Conditions = append(cur.Status.Conditions, appsv1.DeploymentCondition{
		Type: "StatusUpdate", Status: v1.ConditionTrue, Reason: "E2E", Message: "Set from e2e test", LastUpdateTime: now, LastTransitionTime: now,
	})
	if _, err := deps.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	patch := `{"status":{"conditions":[{"type":"StatusPatched","status":"True","reason":"E2E","message":"patched"}]}}`
	if _, err := deps.Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patch /status: %v", err)
	}
	scaleDeployment(ctx, t, ns, d.Name, 2) // forces a controller status write
	got := waitDeployment(t, ns, d.Name, "complete at 2", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2 && harness.DeploymentComplete(d)
	})
	for _, ct := range []appsv1.DeploymentConditionType{"StatusUpdate", "StatusPatched"} {
		if condition(got, ct) == nil {
			t.Errorf("custom condition %s was dropped: %+v", ct, got.Status.Conditions)
		}
	}
}
