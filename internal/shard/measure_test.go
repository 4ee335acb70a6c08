package shard

import (
	"context"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// steadyObjects is a namespace mid-rollout, as SH-8 weighs it: Deployment web (4 replicas) whose new and old
// ReplicaSets hold 6 pods between them (its surge), a ReplicaSet of its own with 2 pods, a StatefulSet's pod
// and a bare pod: 4 + 2 + 1 + 1 = 8 steady pods. Namespace "empty" holds nothing.
func steadyObjects() (deployments []runtime.Object, meta []runtime.Object) {
	ctrl := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	partial := func(resource, name, uid string, owners []metav1.OwnerReference) runtime.Object {
		kind := map[string]string{"pods": "Pod", "replicasets": "ReplicaSet"}[resource]
		gv := map[string]string{"pods": "v1", "replicasets": "apps/v1"}[resource]
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(uid), OwnerReferences: owners}}
	}
	deployments = []runtime.Object{
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "d1"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}},
	}
	meta = []runtime.Object{
		partial("replicasets", "web-new", "rs-new", ctrl("Deployment", "web", "d1")),
		partial("replicasets", "web-old", "rs-old", ctrl("Deployment", "web", "d1")),
		partial("replicasets", "own", "rs-own", nil),
		partial("pods", "db-0", "p-db", ctrl("StatefulSet", "db", "ss1")),
		partial("pods", "bare", "p-bare", nil),
	}
	for i, rs := range []string{"rs-new", "rs-new", "rs-new", "rs-old", "rs-old", "rs-old", "rs-own", "rs-own"} {
		name := string(rune('a' + i))
		meta = append(meta, partial("pods", name, "p-"+name, ctrl("ReplicaSet", rs, rs)))
	}
	return deployments, meta
}

// TestSteadyByNamespace is SH-8's measure: a Deployment weighs its replicas, not its ReplicaSets' pods mid-
// rollout; other pods weigh one each; every namespace is listed, empty ones at 0. Where Deployments may not
// be listed, every pod counts.
func TestSteadyByNamespace(t *testing.T) {
	deployments, meta := steadyObjects()
	for _, tc := range []struct {
		name      string
		forbidden bool
		want      map[string]int
	}{
		{"steady", false, map[string]int{"team": 8, "empty": 0}},
		{"Deployments forbidden", true, map[string]int{"team": 10, "empty": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(deployments...)
			if tc.forbidden {
				client.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", nil)
				})
			}
			scheme := runtime.NewScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			got, err := SteadyByNamespace(context.Background(), client, metafake.NewSimpleMetadataClient(scheme, meta...))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("SteadyByNamespace = %v, want %v", got, tc.want)
			}
		})
	}
}
