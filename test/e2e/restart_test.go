package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// midRollout reports whether d's rollout has started but not finished: some
// but not all replicas are updated and available.
func midRollout(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment) (bool, error) {
	got, err := client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return got.Generation > d.Generation && got.Status.UpdatedReplicas >= 5 && got.Status.UpdatedReplicas < 20, nil
}

// TestInterruptAndResumeRollout: Ctrl-C `kubedeploy up` in the middle of a
// rollout and start it again on the same data dir: every object is still
// there, the rollout completes, and the ReplicaSets stay within the
// maxSurge/maxUnavailable bounds at every change seen after the restart.
func TestInterruptAndResumeRollout(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--api-port", "0", "--pod-startup-delay", "2s"}
	p := startUp(t, args...)
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	d, err := client.AppsV1().Deployments("default").Create(ctx, harness.NewDeployment("default", "nginx-deployment", 20, "nginx:1.9"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = harness.WaitComplete(t, client, "default", d.Name, 2*time.Minute)
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"nginx-deployment","image":"nginx:1.9.3"}]}}}}`
	if _, err := client.AppsV1().Deployments("default").Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "the rollout to be half-way", func(ctx context.Context) (bool, error) {
		return midRollout(ctx, client, d)
	})
	p.interrupt(t)

	startUp(t, args...)
	client = clientFor(t, dir)
	w := harness.WatchRollout(t, client, "default", d.Name, harness.Bounds{MaxTotal: 25, MinAvailable: 15})
	got, err := client.AppsV1().Deployments("default").Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment is gone after the restart: %v", err)
	}
	if got.UID != d.UID {
		t.Fatalf("the Deployment was recreated (uid %s, was %s)", got.UID, d.UID)
	}
	if got.Status.UpdatedReplicas >= 20 {
		t.Fatalf("the rollout was not interrupted mid-way: %+v", got.Status)
	}
	done := harness.WaitComplete(t, client, "default", d.Name, 3*time.Minute)
	w.Stop()
	w.Check(2)
	if rev := done.Annotations["deployment.kubernetes.io/revision"]; rev != "2" {
		t.Errorf("revision after the resumed rollout = %q, want 2", rev)
	}
	rss := harness.OwnedReplicaSets(ctx, t, client, done)
	if len(rss) != 2 {
		t.Errorf("got %d ReplicaSets, want 2 (old kept at 0, new at 20): %v", len(rss), names(rss))
	}
}

func names(rss []appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, fmt.Sprintf("%s=%d", rs.Name, *rs.Spec.Replicas))
	}
	return out
}
