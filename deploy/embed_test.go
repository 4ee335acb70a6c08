package deploy

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestManifestsDecode(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	for kind, want := range map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 4, "ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2, "StatefulSet": 1, "Service": 1, "Deployment": 0} {
		if kinds[kind] != want {
			t.Errorf("%d objects of kind %s, want %d (all: %v)", kinds[kind], kind, want, kinds)
		}
	}
}

// TestNoWildcards: least privilege means every verb, resource, API group and
// URL is named, in deploy/ and deploy/sharded.
func TestNoWildcards(t *testing.T) {
	objs := allObjects(t)
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
			if r.AggregationRule != nil {
				t.Errorf("ClusterRole %s aggregates other roles", r.Name)
			}
		case *rbacv1.Role:
			rules = r.Rules
		}
		for _, rule := range rules {
			for _, list := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups, rule.NonResourceURLs, rule.ResourceNames} {
				if slices.ContainsFunc(list, func(s string) bool { return s == "*" || s == "*/*" }) {
					t.Errorf("%s %s grants a wildcard: %+v", o.GetObjectKind().GroupVersionKind().Kind, name(o), rule)
				}
			}
			if slices.ContainsFunc(rule.Verbs, func(v string) bool { return v == "escalate" || v == "bind" || v == "impersonate" }) {
				t.Errorf("%s grants %v", name(o), rule.Verbs)
			}
		}
	}
}

// TestBindingsNameTheServiceAccount: every binding, of deploy/ and deploy/sharded, binds our ServiceAccount to a
// role shipped here.
func TestBindingsNameTheServiceAccount(t *testing.T) {
	objs := allObjects(t)
	roles := map[string]bool{}
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			roles["ClusterRole/"+r.Name] = true
		case *rbacv1.Role:
			roles["Role/"+r.Namespace+"/"+r.Name] = true
		}
	}
	check := func(what string, ref rbacv1.RoleRef, ns string, subjects []rbacv1.Subject) {
		key := ref.Kind + "/" + ref.Name
		if ref.Kind == "Role" {
			key = "Role/" + ns + "/" + ref.Name
		}
		if !roles[key] {
			t.Errorf("%s refers to %s, not shipped in deploy/", what, key)
		}
		want := rbacv1.Subject{Kind: "ServiceAccount", Name: ServiceAccount, Namespace: Namespace}
		if len(subjects) != 1 || subjects[0] != want {
			t.Errorf("%s subjects = %+v, want only %+v", what, subjects, want)
		}
	}
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			check("ClusterRoleBinding "+b.Name, b.RoleRef, "", b.Subjects)
		case *rbacv1.RoleBinding:
			check("RoleBinding "+b.Namespace+"/"+b.Name, b.RoleRef, b.Namespace, b.Subjects)
		}
	}
}

// TestStatefulSetRunsControllersWithProbes: the controllers run as a
// StatefulSet (no Deployment: the cluster's deployment controller is off),
// as our ServiceAccount, the controllers-only binary with probes on its
// secure port, resource requests, and a toleration for control-plane nodes.
func TestStatefulSetRunsControllersWithProbes(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		d, ok := o.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		spec := d.Spec.Template.Spec
		if spec.ServiceAccountName != ServiceAccount || d.Namespace != Namespace {
			t.Errorf("StatefulSet runs as %s/%s", d.Namespace, spec.ServiceAccountName)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 || d.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("replicas %v, podManagementPolicy %q; want ≥ 2 (leader + standby), Parallel", d.Spec.Replicas, d.Spec.PodManagementPolicy)
		}
		c := spec.Containers[0]
		if !strings.Contains(c.Image, "kubedeploy-controllers") || slices.Contains(c.Args, "controllers") {
			t.Errorf("image %s, args %v: want the controllers-only binary, which takes no subcommand", c.Image, c.Args)
		}
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "node-role.kubernetes.io/control-plane" }) {
			t.Errorf("tolerations %v: want the control-plane taint tolerated", spec.Tolerations)
		}
		for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("probe %+v, want HTTPS %s", probe, path)
			}
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("no resource requests: %+v", c.Resources)
		}
		return
	}
	t.Fatal("no StatefulSet in deploy/")
}

func name(o runtime.Object) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return "?"
}

// Observe mode's manifests (issue 25): its ClusterRole only reads (get, list, watch on deployments, replicasets,
// pods and events), and its Deployment runs `observe` with probes on the plain-HTTP port it serves.
func TestObserveManifests(t *testing.T) {
	objs, err := ObserveObjects()
	if err != nil {
		t.Fatal(err)
	}
	var roles, deployments int
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			roles++
			for _, rule := range o.Rules {
				for _, v := range rule.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("ClusterRole %s grants %q: observe mode only reads", o.Name, v)
					}
				}
			}
		case *appsv1.Deployment:
			deployments++
			c := o.Spec.Template.Spec.Containers[0]
			if len(c.Args) == 0 || c.Args[0] != "observe" || !slices.Contains(c.Args, "--port=10261") {
				t.Errorf("observe Deployment runs %v", c.Args)
			}
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "http-metrics" || p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
					t.Errorf("observe Deployment's probe %+v, want plain HTTP on http-metrics", p)
				}
			}
		}
	}
	if roles != 1 || deployments != 1 {
		t.Errorf("%d ClusterRoles and %d Deployments, want 1 of each", roles, deployments)
	}
}
