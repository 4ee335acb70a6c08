package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// patchReplicaSet applies a merge patch to ReplicaSet ns/name.
func patchReplicaSet(ctx context.Context, t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := env.Client.AppsV1().ReplicaSets(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching ReplicaSet %s: %v", name, err)
	}
}

// waitOwnerRefs waits until ReplicaSet ns/name has n ownerReferences, one of
// them a ControllerRef to d, and returns it.
func waitOwnerRefs(t *testing.T, ns, name string, d *appsv1.Deployment, n int) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	harness.Eventually(t, rolloutTimeout, fmt.Sprintf("%s to have %d ownerReferences incl. a ControllerRef to %s", name, n, d.Name), func(ctx context.Context) (bool, error) {
		var err error
		rs, err = env.Client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(rs)
		return len(rs.OwnerReferences) == n && ref != nil && ref.UID == d.UID, nil
	})
	return rs
}

// TestGeneralReplicaSetAdoption (15.1, AD-1, AD-4): a ReplicaSet whose only
// ownerReference is a non-controller ref to something else is adopted (2
// refs); a non-controller ref to the Deployment itself is upgraded in place
// to a ControllerRef (1 ref).
func TestGeneralReplicaSetAdoption(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "adopter", 1, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	rs := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0]

	// A real owner: the garbage collector deletes objects whose owners are all gone.
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1.9"}}},
			},
		},
	}
	sts, err := env.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patchReplicaSet(ctx, t, ns, rs.Name, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"other","uid":%q}]}}`, sts.UID))
	waitOwnerRefs(t, ns, rs.Name, d, 2)

	patchReplicaSet(ctx, t, ns, rs.Name, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":%q,"uid":%q}]}}`, d.Name, d.UID))
	got := waitOwnerRefs(t, ns, rs.Name, d, 1)
	if got.UID != rs.UID {
		t.Errorf("ReplicaSet was replaced instead of adopted")
	}
	if ref := got.OwnerReferences[0]; ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("upgraded ref %+v lacks blockOwnerDeletion (OM-24)", ref)
	}
}

// TestReplicaSetOrphaningAndAdoptionWhenLabelsChange (15.1, AD-7, RV-10):
// relabeling the ReplicaSet so it no longer matches releases it; the
// deterministic name is then taken by an orphan, so collisionCount becomes 1
// and a ReplicaSet with another hash is created; relabeling the orphan back
// makes the Deployment adopt it again.
func TestReplicaSetOrphaningAndAdoptionWhenLabelsChange(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "relabel", 2, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	rs := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0]

	patchReplicaSet(ctx, t, ns, rs.Name, `{"metadata":{"labels":{"app":"elsewhere"}}}`)
	harness.Eventually(t, rolloutTimeout, "the relabeled ReplicaSet to be released", func(ctx context.Context) (bool, error) {
		got, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return metav1.GetControllerOf(got) == nil, nil
	})
	d = waitDeployment(t, ns, d.Name, "a ReplicaSet under another hash", func(d *appsv1.Deployment) bool {
		return d.Status.CollisionCount != nil && *d.Status.CollisionCount == 1 && harness.DeploymentComplete(d)
	})
	owned := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	if len(owned) != 1 || owned[0].Name == rs.Name {
		t.Fatalf("owned ReplicaSets %d, want one new one besides the orphan %s", len(owned), rs.Name)
	}

	patchReplicaSet(ctx, t, ns, rs.Name, fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, d.Name))
	waitOwnerRefs(t, ns, rs.Name, d, 1)
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	if n := len(harness.OwnedReplicaSets(ctx, t, env.Client, d)); n != 2 {
		t.Errorf("after re-adoption %d owned ReplicaSets, want 2", n)
	}
}

// TestDeploymentOrphaningAndAdoptionControllerRef (15.2 "orphaning and
// adoption regarding controllerRef", AD-1, AD-3, RV-1): deleting a Deployment
// with orphan propagation leaves its ReplicaSet without a ControllerRef; a new
// Deployment with the same selector and template adopts that very ReplicaSet
// and creates none.
func TestDeploymentOrphaningAndAdoptionControllerRef(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "orphaner", 2, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	rs := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0]
	orphan := metav1.DeletePropagationOrphan
	if err := env.Client.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, rolloutTimeout, "the ReplicaSet to be orphaned", func(ctx context.Context) (bool, error) {
		got, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(got.OwnerReferences) == 0, nil
	})
	adopter := harness.NewDeployment(ns, "adopter", 2, "nginx:1.9")
	adopter.Spec.Selector, adopter.Spec.Template = d.Spec.Selector.DeepCopy(), *d.Spec.Template.DeepCopy()
	adopter = createDeployment(ctx, t, adopter)
	got := waitOwnerRefs(t, ns, rs.Name, adopter, 1)
	if got.UID != rs.UID {
		t.Fatalf("adopted ReplicaSet UID %s, want %s", got.UID, rs.UID)
	}
	adopter = harness.WaitComplete(t, env.Client, ns, adopter.Name, rolloutTimeout)
	all, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 1 {
		t.Errorf("%d ReplicaSets in the namespace, want only the adopted one", len(all.Items))
	}
}

// TestRollingUpdateAdoptsAndContinuesRevisions (15.2 conformance
// "RollingUpdateDeployment should delete old pods and create new ones",
// AD-1, RV-5, OM-1 int64): a pre-existing matching ReplicaSet at revision
// 3546343826724305832 is adopted; the Deployment's own ReplicaSet gets
// revision 3546343826724305833, completes and leaves exactly one old
// ReplicaSet, scaled to 0.
func TestRollingUpdateAdoptsAndContinuesRevisions(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	pre := legacyReplicaSet(ns, "test-rolling-update", 1, "nginx:1.9")
	pre.Annotations = map[string]string{revisionAnnotation: "3546343826724305832"}
	pre = createReplicaSet(ctx, t, pre)
	d := harness.NewDeployment(ns, "test-rolling-update", 1, "nginx:1.9.3")
	d.Spec.Selector.MatchLabels = pre.Spec.Selector.MatchLabels
	d.Spec.Template.Labels = pre.Spec.Template.Labels
	d = createDeployment(ctx, t, d)
	d = waitRevision(t, ns, d.Name, "3546343826724305833")
	var old []appsv1.ReplicaSet
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if rs.Annotations[revisionAnnotation] != "3546343826724305833" {
			old = append(old, rs)
		}
	}
	if len(old) != 1 || old[0].UID != pre.UID || specOf(&old[0]) != 0 {
		t.Fatalf("old ReplicaSets %d, want the adopted one at 0", len(old))
	}
}

// TestDeploymentDeletesOldReplicaSets (15.2 conformance "deployment should
// delete old replica sets", CL-2..CL-5): with revisionHistoryLimit 0 the
// adopted ReplicaSet is deleted once the rollout is done; its pods are not
// recreated (only the new ReplicaSet's one pod is created).
func TestDeploymentDeletesOldReplicaSets(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	pre := createReplicaSet(ctx, t, legacyReplicaSet(ns, "test-cleanup", 1, "nginx:1.9"))
	waitReplicaSetAvailable(t, ns, pre.Name, 1)
	pods := watchPodAdds(ctx, t, ns)
	d := harness.NewDeployment(ns, "test-cleanup", 1, "nginx:1.9.3")
	d.Spec.Selector.MatchLabels = pre.Spec.Selector.MatchLabels
	d.Spec.Template.Labels = pre.Spec.Template.Labels
	d.Spec.RevisionHistoryLimit = new(int32(0))
	d = createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	waitReplicaSets(t, d, "old ReplicaSets to be deleted", func(rss []appsv1.ReplicaSet) bool { return len(rss) == 1 })
	if _, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, pre.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("adopted ReplicaSet %s still exists", pre.Name)
	}
	if n := pods(); n != 1 {
		t.Errorf("%d pods created during the rollout, want 1", n)
	}
}

// legacyReplicaSet is a ReplicaSet not created by a Deployment: no hash label,
// selector and labels name=<name>, pod=httpd as in the upstream e2e tests.
func legacyReplicaSet(ns, name string, replicas int32, image string) *appsv1.ReplicaSet {
	rs := harness.NewReplicaSet(ns, name, replicas)
	l := map[string]string{"name": name, "pod": "httpd"}
	rs.Labels, rs.Spec.Selector.MatchLabels, rs.Spec.Template.Labels = l, l, l
	rs.Spec.Template.Spec.Containers[0].Image = image
	return rs
}

func createReplicaSet(ctx context.Context, t *testing.T, rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	t.Helper()
	got, err := env.Client.AppsV1().ReplicaSets(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ReplicaSet %s: %v", rs.Name, err)
	}
	return got
}

// waitReplicaSetAvailable waits for ReplicaSet ns/name to have n available replicas.
func waitReplicaSetAvailable(t *testing.T, ns, name string, n int32) {
	t.Helper()
	harness.Eventually(t, rolloutTimeout, fmt.Sprintf("%s to have %d available", name, n), func(ctx context.Context) (bool, error) {
		rs, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return rs.Status.AvailableReplicas == n, nil
	})
}

// watchPodAdds watches pods in ns from now on and returns a function that
// reports how many pods were created so far.
func watchPodAdds(ctx context.Context, t *testing.T, ns string) func() int {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[types.UID]bool{}
	for _, p := range list.Items {
		seen[p.UID] = true
	}
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	created := make(chan int, 1)
	created <- 0
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*v1.Pod); ok && !seen[p.UID] {
				seen[p.UID] = true
				created <- <-created + 1
			}
		}
	}()
	return func() int {
		n := <-created
		created <- n
		return n
	}
}
