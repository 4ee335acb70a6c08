package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

const (
	revisionAnnotation = "deployment.kubernetes.io/revision"
	hashLabel          = "pod-template-hash"
	rolloutTimeout     = 2 * time.Minute
)

// kubedeployManager reports whether managedFields name a kubedeploy field manager.
func kubedeployManager(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if strings.HasPrefix(f.Manager, "kubedeploy") {
			return true
		}
	}
	return false
}

// TestNewDeployment is upstream's TestNewDeployment (spec 15.1) with the
// seed's Deployment: OM-10 (hash in labels, selector, template; name ends with
// it), RV-4/OM-7/OM-8 (custom annotation copied, last-applied not), RV-5
// (revision 1), and our writes recognisable by their field manager.
func TestNewDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "nginx-deployment", 20, "nginx:1.9")
	d.Annotations = map[string]string{
		"test":                         "should-copy-to-replica-set",
		v1.LastAppliedConfigAnnotation: "should-not-copy-to-replica-set",
	}
	d, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	if got := d.Annotations[revisionAnnotation]; got != "1" {
		t.Errorf("deployment revision = %q, want 1", got)
	}
	rss := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	if len(rss) != 1 {
		t.Fatalf("got %d ReplicaSets, want 1", len(rss))
	}
	rs := rss[0]
	hash := rs.Labels[hashLabel]
	if hash == "" || rs.Spec.Selector.MatchLabels[hashLabel] != hash || rs.Spec.Template.Labels[hashLabel] != hash {
		t.Errorf("hash label differs: labels %v selector %v template %v", rs.Labels, rs.Spec.Selector.MatchLabels, rs.Spec.Template.Labels)
	}
	if rs.Name != d.Name+"-"+hash {
		t.Errorf("ReplicaSet name %q, want %q", rs.Name, d.Name+"-"+hash)
	}
	if rs.Annotations["test"] != "should-copy-to-replica-set" {
		t.Errorf("custom annotation not copied: %v", rs.Annotations)
	}
	if _, ok := rs.Annotations[v1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("last-applied-configuration was copied to the ReplicaSet")
	}
	if rs.Annotations[revisionAnnotation] != "1" || rs.Annotations["deployment.kubernetes.io/desired-replicas"] != "20" ||
		rs.Annotations["deployment.kubernetes.io/max-replicas"] != "25" {
		t.Errorf("ReplicaSet annotations %v, want revision 1, desired 20, max 25", rs.Annotations)
	}
	if !kubedeployManager(rs.ManagedFields) {
		t.Errorf("ReplicaSet managedFields name no kubedeploy manager: %+v", rs.ManagedFields)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 20 {
		t.Errorf("got %d pods, want 20", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Labels[hashLabel] != hash {
			t.Errorf("pod %s has hash %q, want %q", p.Name, p.Labels[hashLabel], hash)
		}
		if !kubedeployManager(p.ManagedFields) {
			t.Errorf("pod %s managedFields name no kubedeploy manager", p.Name)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID {
			t.Errorf("pod %s is not controlled by %s", p.Name, rs.Name)
		}
	}
}

// setImage changes the container image the way `kubectl set image` does (a
// strategic-merge patch of the template).
func setImage(ctx context.Context, t *testing.T, ns, name, container, image string) {
	t.Helper()
	harness.SetImage(ctx, t, env.Client, ns, name, container, image)
}

// TestRollingUpdateRespectsBounds is the seed walkthrough: set image on the
// 20-replica Deployment, then undo, then scale, with the RU bounds (at most
// 25 replicas, at least 15 available: RU-2, RU-10, RU-11) watched at every
// ReplicaSet change during both rollouts.
func TestRollingUpdateRespectsBounds(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	d, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "nginx-deployment", 20, "nginx:1.9"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	bounds := harness.Bounds{MaxTotal: 25, MinAvailable: 15}

	w := harness.WatchRollout(t, env.Client, ns, d.Name, bounds)
	setImage(ctx, t, ns, d.Name, "nginx-deployment", "nginx:1.9.3")
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	w.Stop()
	w.Check(8)
	if got := d.Annotations[revisionAnnotation]; got != "2" {
		t.Errorf("revision after set image = %q, want 2", got)
	}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		img := rs.Spec.Template.Spec.Containers[0].Image
		if img == "nginx:1.9" && (*rs.Spec.Replicas != 0 || rs.Status.Replicas != 0) {
			t.Errorf("old ReplicaSet %s still has %d/%d replicas", rs.Name, *rs.Spec.Replicas, rs.Status.Replicas)
		}
	}

	w = harness.WatchRollout(t, env.Client, ns, d.Name, bounds)
	kubectlUndo(ctx, t, d, "1")
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	w.Stop()
	w.Check(8)
	if got := d.Annotations[revisionAnnotation]; got != "3" {
		t.Errorf("revision after undo = %q, want 3", got)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.9" {
		t.Errorf("image after undo = %q, want nginx:1.9", img)
	}
	// RV-2/RV-6: the old ReplicaSet became new again and remembers revision 1.
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if rs.Annotations[revisionAnnotation] == "3" && rs.Annotations["deployment.kubernetes.io/revision-history"] != "1" {
			t.Errorf("revision-history of %s = %q, want 1", rs.Name, rs.Annotations["deployment.kubernetes.io/revision-history"])
		}
	}

	scale := fmt.Sprintf(`{"spec":{"replicas":%d}}`, 5)
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, []byte(scale), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	var total int32
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		total += *rs.Spec.Replicas
	}
	if total != 5 || d.Status.AvailableReplicas != 5 {
		t.Errorf("after scale to 5: ReplicaSets total %d, available %d", total, d.Status.AvailableReplicas)
	}
}

// TestDeleteDeploymentCascades: deleting a Deployment with the default
// propagation removes its ReplicaSets and pods (OM-24 blockOwnerDeletion
// refs, OM-25, the embedded garbage collector).
func TestDeleteDeploymentCascades(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "doomed", 4, "nginx:1.9"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	if err := env.Client.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	harness.Eventually(t, 2*time.Minute, "ReplicaSets and pods to be deleted", func(ctx context.Context) (bool, error) {
		rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		return len(rss.Items) == 0 && len(pods.Items) == 0, nil
	})
}
