package ownership

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// controllerRef is a ControllerRef of apiVersion and kind to name and uid.
func controllerRef(apiVersion, kind, name, uid string) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}
}

// oddRefs are the ControllerRefs every walk must judge alike, each with whether it names the cached ReplicaSet
// "web-1" (uid rs-uid) by the one rule: kind, apps group (any version, extensions counting as apps), name, UID.
var oddRefs = []struct {
	name string
	ref  *metav1.OwnerReference
	ours bool
}{
	{"apps/v1", controllerRef("apps/v1", "ReplicaSet", "web-1", "rs-uid"), true},
	{"another apps version", controllerRef("apps/v1beta2", "ReplicaSet", "web-1", "rs-uid"), true},
	{"the legacy extensions group", controllerRef("extensions/v1beta1", "ReplicaSet", "web-1", "rs-uid"), true},
	{"missing", nil, false},
	{"wrong group", controllerRef("example.com/v1", "ReplicaSet", "web-1", "rs-uid"), false},
	{"the core group", controllerRef("v1", "ReplicaSet", "web-1", "rs-uid"), false},
	{"no apiVersion", controllerRef("", "ReplicaSet", "web-1", "rs-uid"), false},
	{"an apiVersion that does not parse", controllerRef("a/b/c", "ReplicaSet", "web-1", "rs-uid"), false},
	{"wrong kind", controllerRef("apps/v1", "StatefulSet", "web-1", "rs-uid"), false},
	{"UID mismatch (replaced under the same name)", controllerRef("apps/v1", "ReplicaSet", "web-1", "old-uid"), false},
	{"not in the cache", controllerRef("apps/v1", "ReplicaSet", "web-2", "rs-uid"), false},
}

// cachedReplicaSet is "web-1" (uid rs-uid) controlled by Deployment "web", and a lookup by name that finds it alone.
func cachedReplicaSet() (*appsv1.ReplicaSet, func(name string) (*appsv1.ReplicaSet, error)) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{*controllerRef("apps/v1", "Deployment", "web", "d-uid")}}}
	return rs, func(name string) (*appsv1.ReplicaSet, error) {
		if name != rs.Name {
			return nil, errors.New("not found")
		}
		return rs, nil
	}
}

// TestResolveOddRefs (EH-5): Resolve, and the walks built on it, accept exactly the refs of the one rule.
func TestResolveOddRefs(t *testing.T) {
	rs, get := cachedReplicaSet()
	for _, c := range oddRefs {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Resolve(c.ref, ReplicaSetKind, get)
			if ok != c.ours || (ok && got != rs) || (!ok && got != nil) {
				t.Errorf("Resolve = %v, %v; want ours=%v", got, ok, c.ours)
			}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1-abcde"}}
			if c.ref != nil {
				pod.OwnerReferences = []metav1.OwnerReference{*c.ref}
			}
			if got, ok := ReplicaSetOf(pod, get); ok != c.ours || (ok && got != rs) {
				t.Errorf("ReplicaSetOf = %v, %v; want ours=%v", got, ok, c.ours)
			}
			if _, name, ok := DeploymentOfPod(pod, get); ok != c.ours || (ok && name != "web") {
				t.Errorf("DeploymentOfPod = %q, %v; want ours=%v", name, ok, c.ours)
			}
		})
	}
}

// TestDeploymentOfPodOwnerLinks: the second link, ReplicaSet → Deployment, is judged by the same rule.
func TestDeploymentOfPodOwnerLinks(t *testing.T) {
	rs, get := cachedReplicaSet()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1-abcde",
		OwnerReferences: []metav1.OwnerReference{*controllerRef("apps/v1", "ReplicaSet", "web-1", "rs-uid")}}}
	cases := []struct {
		name  string
		owner *metav1.OwnerReference
		want  string
	}{
		{"a Deployment's ReplicaSet", controllerRef("apps/v1", "Deployment", "web", "d-uid"), "web"},
		{"an extensions Deployment's ReplicaSet", controllerRef("extensions/v1beta1", "Deployment", "web", "d-uid"), "web"},
		{"a bare ReplicaSet", nil, ""},
		{"a ReplicaSet of a Deployment kind of another group", controllerRef("example.com/v1", "Deployment", "web", "d-uid"), ""},
		{"a ReplicaSet of a bad apiVersion", controllerRef("a/b/c", "Deployment", "web", "d-uid"), ""},
		{"a ReplicaSet of another kind", controllerRef("argoproj.io/v1alpha1", "Rollout", "web", "d-uid"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs.OwnerReferences = nil
			if c.owner != nil {
				rs.OwnerReferences = []metav1.OwnerReference{*c.owner}
			}
			gotRS, name, ok := DeploymentOfPod(pod, get)
			if name != c.want || ok != (c.want != "") || (ok && gotRS != rs) || (!ok && gotRS != nil) {
				t.Errorf("DeploymentOfPod = %v, %q, %v; want %q", gotRS, name, ok, c.want)
			}
			if name, ok := DeploymentOf(rs); name != c.want || ok != (c.want != "") {
				t.Errorf("DeploymentOf = %q, %v; want %q", name, ok, c.want)
			}
		})
	}
}

// TestControllerIndexOddRefs: the controller index files an object under its controller's UID only by the one
// rule; one controlled by anything else is neither ours nor an orphan to adopt, and ControllerUID agrees.
func TestControllerIndexOddRefs(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ControllerIndex: controllerIndexFunc})
	for i, c := range oddRefs {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: c.name, UID: types.UID(string(rune('a' + i)))}}
		if c.ref != nil {
			pod.OwnerReferences = []metav1.OwnerReference{*c.ref}
		}
		if err := indexer.Add(pod); err != nil {
			t.Fatal(err)
		}
		uid, ok := ControllerUID(pod)
		// The name and the cache do not matter to a UID match; kind and group do.
		wantOK := c.ref != nil && (c.ours || c.name == "not in the cache" || c.name == "UID mismatch (replaced under the same name)")
		if ok != wantOK || (ok && uid != c.ref.UID) {
			t.Errorf("%s: ControllerUID = %q, %v; want %v", c.name, uid, ok, wantOK)
		}
	}
	owned, err := ByController[*v1.Pod](indexer, "rs-uid")
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := Orphans[*v1.Pod](indexer, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := podNames(owned); len(got) != 4 {
		t.Errorf("controlled by rs-uid: %v, want the three apps refs and the one of another name", got)
	}
	if got := podNames(orphans); len(got) != 1 || got[0] != "ns/missing" {
		t.Errorf("orphans: %v, want the pod without a ControllerRef alone", got)
	}
}

// TestClaimIgnoresABorrowedUID (AD-1): a pod whose ControllerRef carries the owner's UID but names a ReplicaSet
// of another group is another owner's: not claimed, not released, not adopted.
func TestClaimIgnoresABorrowedUID(t *testing.T) {
	borrowed := pod("a", "web", "")
	borrowed.OwnerReferences = []metav1.OwnerReference{*controllerRef("example.com/v1", "ReplicaSet", "rs", "owner-uid")}
	patches := 0
	c := &Claimer[*v1.Pod]{
		Owner: owner(false), OwnerKind: rsKind, ObjectKind: "Pod", Selector: labels.SelectorFromSet(labels.Set{"app": "web"}),
		Patch: func(_ context.Context, p *v1.Pod, _ []byte) (*v1.Pod, error) { patches++; return p, nil },
	}
	_, ctx := ktesting.NewTestContext(t)
	claimed, err := c.Claim(ctx, []*v1.Pod{borrowed, pod("b", "web", "owner-uid")})
	if err != nil {
		t.Fatal(err)
	}
	if got := podNames(claimed); len(got) != 1 || got[0] != "ns/b" || patches != 0 {
		t.Errorf("claimed %v with %d patches, want b alone and no write", got, patches)
	}
}
