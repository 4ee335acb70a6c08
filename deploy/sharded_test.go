package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// allObjects returns the controllers' objects and sharded mode's, for the checks that hold for every role and
// binding shipped here (least privilege, bindings to our ServiceAccount).
func allObjects(t *testing.T) []runtime.Object {
	t.Helper()
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	sharded, err := ShardedObjects()
	if err != nil {
		t.Fatal(err)
	}
	return append(objs, sharded...)
}

// grants flattens rules (of a Role in namespace ns, or a ClusterRole when ns is "") into one
// "namespace group/resource name verb" string per permission.
func grants(ns string, rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out = append(out, fmt.Sprintf("%s %s/%s %s %s", ns, g, res, n, v))
					}
				}
			}
		}
	}
	return out
}

// TestShardedRBACIsWhatShardedModeUses: deploy/sharded grants exactly what internal/shard and the manager's
// sharded mode do on top of deploy/'s roles: in the replicas' namespace, every Lease verb the membership and the
// coordinator's informer use, creating the ring and reading and updating the ring by name (its informer lists and
// watches with a metadata.name field selector, which RBAC checks against resourceNames); cluster-wide, listing
// namespaces to measure a new ring. Listing pods as metadata, and with a shard selector, is deploy/'s pods list.
func TestShardedRBACIsWhatShardedModeUses(t *testing.T) {
	objs, err := ShardedObjects()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.Role:
			got = append(got, grants(r.Namespace, r.Rules)...)
		case *rbacv1.ClusterRole:
			got = append(got, grants("", r.Rules)...)
		}
	}
	var want []string
	for _, v := range []string{"get", "list", "watch", "create", "update", "delete"} {
		want = append(want, Namespace+" coordination.k8s.io/leases * "+v)
	}
	want = append(want, Namespace+" /configmaps * create")
	for _, v := range []string{"get", "list", "watch", "update"} {
		want = append(want, Namespace+" /configmaps "+shard.DefaultRingName+" "+v)
	}
	want = append(want, " /namespaces * list")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("deploy/sharded grants\n  %s\nwant exactly\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	pods := false
	controllers, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range controllers {
		if r, ok := o.(*rbacv1.ClusterRole); ok && slices.Contains(grants("", r.Rules), " /pods * list") {
			pods = true
		}
	}
	if !pods {
		t.Error("no ClusterRole of deploy/ lets the controllers list pods, which sharded mode's measure and probe do")
	}
}

// TestShardedManifests: deploy/sharded holds one Role, ClusterRole and binding of each, and a StatefulSet of
// three replicas of the controllers-only binary with --sharding, its Leases and ring in the Role's namespace,
// named and labelled apart from deploy/'s StatefulSet (never run beside it), as our ServiceAccount, with probes.
func TestShardedManifests(t *testing.T) {
	objs, err := ShardedObjects()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var set *appsv1.StatefulSet
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
		if s, ok := o.(*appsv1.StatefulSet); ok {
			set = s
		}
	}
	want := map[string]int{"Role": 1, "RoleBinding": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "StatefulSet": 1, "Service": 1}
	if !maps.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	c := set.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--sharding", "--leader-elect-resource-namespace=" + Namespace} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v: want %s", c.Args, arg)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--shard-ring-name") || a == "--leader-elect=false" }) {
		t.Errorf("args %v: the Role names the default ring", c.Args)
	}
	if set.Spec.Replicas == nil || *set.Spec.Replicas != 3 || set.Namespace != Namespace || set.Spec.Template.Spec.ServiceAccountName != ServiceAccount {
		t.Errorf("StatefulSet %s/%s: %v replicas as %s; want 3 as %s", set.Namespace, set.Name, set.Spec.Replicas, set.Spec.Template.Spec.ServiceAccountName, ServiceAccount)
	}
	if !strings.Contains(c.Image, "kubedeploy-controllers") {
		t.Errorf("image %s: want the controllers-only binary", c.Image)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("probe %+v, want HTTPS %s", probe, path)
		}
	}
	checkApartFromActivePassive(t, set)
}

// checkApartFromActivePassive fails unless set has another name than deploy/'s StatefulSet and selects none of
// its pods.
func checkApartFromActivePassive(t *testing.T, set *appsv1.StatefulSet) {
	t.Helper()
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		other, ok := o.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		if other.Name == set.Name {
			t.Errorf("StatefulSet %s is also deploy/'s: applying one would turn the other's pods into a mix of modes", set.Name)
		}
		if maps.Equal(other.Spec.Selector.MatchLabels, set.Spec.Selector.MatchLabels) {
			t.Errorf("both StatefulSets select %v", set.Spec.Selector.MatchLabels)
		}
	}
}
