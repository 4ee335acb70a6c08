package apiclient_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	c := apiclient.New(k)
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
