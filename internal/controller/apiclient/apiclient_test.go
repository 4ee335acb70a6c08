package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
)

// The one adapter serves both controllers.
var (
	_ deployment.Client = (*apiclient.Client)(nil)
	_ replicaset.Client = (*apiclient.Client)(nil)
)

// Each request reaches the clientset as the verb, resource, subresource and namespace it names.
func TestRequests(t *testing.T) {
	ctx := context.Background()
	k := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "web"}}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}},
	)
	c := apiclient.New(k, nil)
	d, err := c.GetDeployment(ctx, "ns", "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateDeploymentStatus(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PatchDeployment(ctx, "ns", "d", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"a":"b"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetReplicaSet(ctx, "ns", "rs"); err != nil {
		t.Fatal(err)
	}
	if l, err := c.ListReplicaSets(ctx, "ns"); err != nil || len(l.Items) != 1 {
		t.Fatalf("ListReplicaSets: %v, %v", l, err)
	}
	if _, err := c.CreateReplicaSet(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PatchReplicaSet(ctx, "ns", "rs", "application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PatchReplicaSetStatus(ctx, "ns", "rs", "application/merge-patch+json", []byte(`{"status":{"replicas":2}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteReplicaSet(ctx, "ns", "rs2"); err != nil {
		t.Fatal(err)
	}
	if l, err := c.ListPods(ctx, "ns", labels.SelectorFromSet(labels.Set{"app": "web"})); err != nil || len(l.Items) != 1 {
		t.Fatalf("ListPods by selector: %v, %v; want p alone", l, err)
	}
	if _, err := c.CreatePod(ctx, "ns", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PatchPod(ctx, "ns", "p", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"a":"b"}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePod(ctx, "ns", "p2"); err != nil {
		t.Fatal(err)
	}
	checkRequests(t, k.Actions())
}

// checkRequests checks that actions are, in order, the requests TestRequests sends.
func checkRequests(t *testing.T, actions []clienttesting.Action) {
	t.Helper()
	want := []string{"get deployments", "update deployments/status", "patch deployments", "get replicasets",
		"list replicasets", "create replicasets", "patch replicasets", "patch replicasets/status", "delete replicasets",
		"list pods", "create pods", "patch pods", "delete pods"}
	if len(actions) != len(want) {
		t.Fatalf("%d requests, want %d", len(actions), len(want))
	}
	for i, a := range actions {
		got := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			got += "/" + a.GetSubresource()
		}
		if got != want[i] || a.GetNamespace() != "ns" {
			t.Errorf("request %d: %s in %q, want %s in ns", i, got, a.GetNamespace(), want[i])
		}
	}
}

// TestUnstructuredCreates (IM-8): the creates of objects built from a template as stored go through the dynamic
// client, as JSON, fields kubedeploy's API does not know included, and never through the typed clientset; a Client
// without a dynamic client refuses them.
func TestUnstructuredCreates(t *testing.T) {
	ctx := context.Background()
	k := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	c := apiclient.New(k, dyn)
	rs := objectJSON(t, `{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc", "namespace": "ns"},
	  "spec": {"template": {"spec": {"someFutureField": "x", "containers": [{"name": "web", "image": "nginx:1"}]}}}}`)
	pod := objectJSON(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-abc-1", "namespace": "ns"},
	  "spec": {"someFutureField": "x", "containers": [{"name": "web", "image": "nginx:1"}]}}`)
	created, err := c.CreateReplicaSetUnstructured(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(created.Object, "spec", "template", "spec", "someFutureField"); v != "x" {
		t.Errorf("created ReplicaSet lost someFutureField: %v", created.Object)
	}
	if createdPod, err := c.CreatePodUnstructured(ctx, "ns", pod); err != nil {
		t.Fatal(err)
	} else if v, _, _ := unstructured.NestedString(createdPod.Object, "spec", "someFutureField"); v != "x" {
		t.Errorf("created pod lost someFutureField: %v", createdPod.Object)
	}
	var got []string
	for _, a := range dyn.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Group+"/"+a.GetResource().Resource+" in "+a.GetNamespace())
	}
	if want := "[create apps/replicasets in ns create /pods in ns]"; fmt.Sprint(got) != want {
		t.Errorf("dynamic requests %v, want %s", got, want)
	}
	if n := len(k.Actions()); n != 0 {
		t.Errorf("%d typed requests, want none", n)
	}
	typedOnly := apiclient.New(k, nil)
	if _, err := typedOnly.CreateReplicaSetUnstructured(ctx, rs); !errors.Is(err, apiclient.ErrNoDynamicClient) {
		t.Errorf("CreateReplicaSetUnstructured without a dynamic client: %v", err)
	}
	if _, err := typedOnly.CreatePodUnstructured(ctx, "ns", pod); !errors.Is(err, apiclient.ErrNoDynamicClient) {
		t.Errorf("CreatePodUnstructured without a dynamic client: %v", err)
	}
}

func objectJSON(t *testing.T, raw string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	return u
}
