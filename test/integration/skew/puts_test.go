// Package skew checks, on the embedded control plane with kubedeploy's controllers, what issue 23 (IM-8, version
// skew loses no data) asks of the controllers' writes: a Deployment is never written whole. Its tests write only
// with patches themselves, so that every PUT of a Deployment that kube-apiserver counts is a controller's. The
// controllers run as `up` and the deploy/ manifests run them, as the deploy/ ServiceAccount's user with only its
// ClusterRoles, so a write those roles do not allow fails here too.
package skew

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	// No controllers with the admin identity: runAsDeployIdentity starts them.
	os.Exit(harness.Main(m, harness.Options{Controllers: []string{}}, &env))
}

// runAsDeployIdentity applies deploy/'s Namespace, ServiceAccount and RBAC and runs kubedeploy's controllers as that
// ServiceAccount's user (a client certificate from the cluster CA, no groups) until t ends.
func runAsDeployIdentity(t *testing.T) {
	t.Helper()
	harness.Skip(t, env)
	if err := deploy.ApplyIdentity(context.Background(), env.Client); err != nil {
		t.Fatalf("applying deploy/ RBAC: %v", err)
	}
	cfg, err := env.ControlPlane.ClientConfig(deploy.User)
	if err != nil {
		t.Fatal(err)
	}
	stop := env.RunControllers(manager.Config{RESTConfig: cfg})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
}

// deploymentWrites reads kube-apiserver's /metrics and returns apiserver_request_total for Deployments (group apps,
// no subresource), by verb.
func deploymentWrites(ctx context.Context, t *testing.T) map[string]float64 {
	t.Helper()
	return harness.APIServerRequests(ctx, t, env.Client, func(l map[string]string) string {
		if l["group"] != "apps" || l["resource"] != "deployments" || l["subresource"] != "" {
			return ""
		}
		return l["verb"]
	})
}

// patch applies a JSON merge patch to Deployment ns/name, failing t on error.
func patch(ctx context.Context, t *testing.T, ns, name, body string) {
	t.Helper()
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching %s/%s with %s: %v", ns, name, body, err)
	}
}

// waitFor polls Deployment ns/name until cond holds.
func waitFor(t *testing.T, ns, name, what string, cond func(d *appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var last *appsv1.Deployment
	harness.Eventually(t, 90*time.Second, fmt.Sprintf("deployment %s/%s: %s", ns, name, what), func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		return cond(d), nil
	})
	return last
}

func image(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

func progressingReason(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Reason
		}
	}
	return ""
}

// TestNoDeploymentPUTs: over a rolling update, a rollback by annotation (RB-5), a rollout held and released by a
// partition (EX-1) and an automatic rollback on the progress deadline (EX-2), kube-apiserver counts no PUT of a
// Deployment (subresource ""): kubedeploy writes a Deployment only with patches naming what it changes, and its
// status with /status (IM-8, issue 23), and deploy/'s RBAC allows those patches.
func TestNoDeploymentPUTs(t *testing.T) {
	runAsDeployIdentity(t)
	ns := env.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	before := deploymentWrites(ctx, t)

	d := harness.NewDeployment(ns, "web", 4, "nginx:1")
	d.Spec.ProgressDeadlineSeconds = new(int32(5))
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)

	// A rolling update, then a rollback by annotation to revision 1.
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:2")
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)
	patch(ctx, t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, rolloutstate.RollbackToAnnotation))
	waitFor(t, ns, "web", "rolled back to nginx:1 by annotation", func(d *appsv1.Deployment) bool {
		_, pending := d.Annotations[rolloutstate.RollbackToAnnotation]
		return !pending && image(d) == "nginx:1"
	})
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)

	// A rollout held at a partition, raised, then released.
	patch(ctx, t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, rolloutstate.RolloutPartitionAnnotation))
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:3")
	waitFor(t, ns, "web", "held by the partition", func(d *appsv1.Deployment) bool {
		return progressingReason(d) == rolloutstate.RolloutPartitioned && d.Status.UpdatedReplicas == 1
	})
	patch(ctx, t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"3"}}}`, rolloutstate.RolloutPartitionAnnotation))
	waitFor(t, ns, "web", "held at the raised partition", func(d *appsv1.Deployment) bool {
		return progressingReason(d) == rolloutstate.RolloutPartitioned && d.Status.UpdatedReplicas == 3
	})
	patch(ctx, t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, rolloutstate.RolloutPartitionAnnotation))
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)

	// An automatic rollback when a broken image exceeds the progress deadline.
	patch(ctx, t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, rolloutstate.RollbackOnProgressDeadlineAnnotation))
	// The rollback's target is the last complete revision, which the controller records once the Deployment opted in.
	waitFor(t, ns, "web", "its complete revision recorded", func(d *appsv1.Deployment) bool {
		return d.Annotations[rolloutstate.CompleteRevisionAnnotation] != ""
	})
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:broken")
	waitFor(t, ns, "web", "rolled back automatically to nginx:3", func(d *appsv1.Deployment) bool {
		return d.Annotations[rolloutstate.FailedRevisionAnnotation] != "" && image(d) == "nginx:3"
	})
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)

	after := deploymentWrites(ctx, t)
	t.Logf("Deployment requests during the scenarios (subresource \"\"): PUT %v, PATCH %v (the test's own patches included)",
		after["PUT"]-before["PUT"], after["PATCH"]-before["PATCH"])
	if puts := after["PUT"] - before["PUT"]; puts != 0 {
		t.Errorf("kube-apiserver counted %v PUT deployments during the scenarios, want 0", puts)
	}
}
