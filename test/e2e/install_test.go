package e2e

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestInstallOnClusterWithoutDeploymentController is issue 9's proof that
// the install works where it is meant to run: on `kubedeploy up
// --controllers=` (a cluster with no deployment or replicaset controller at
// all), `kubedeploy kubectl apply -f deploy/` makes the controllers' pods
// exist, be scheduled and run (KWOK simulates them). A Deployment would stay
// at 0 pods there forever.
func TestInstallOnClusterWithoutDeploymentController(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=")
	client := clientFor(t, dir)
	if out, err := kubectl(t, dir, "apply", "-f", deployDir(t)); err != nil {
		t.Fatalf("kubectl apply -f deploy/: %v\n%s", err, out)
	}
	var pods []v1.Pod
	harness.Eventually(t, 2*time.Minute, "the controller pods to run", func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kubedeploy-controllers"})
		if err != nil {
			return false, err
		}
		pods = list.Items
		running := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning && podReady(p) {
				running++
			}
		}
		return running == 2 && len(pods) == 2, nil
	})
	for _, p := range pods {
		if p.Spec.ServiceAccountName != deploy.ServiceAccount {
			t.Errorf("pod %s runs as %q, want %q", p.Name, p.Spec.ServiceAccountName, deploy.ServiceAccount)
		}
	}
	t.Logf("controller pods: %v", podSummary(pods))
}

// podReady reports whether p's Ready condition is True.
func podReady(p v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// deployDir returns the repository's deploy/ directory.
func deployDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

// podSummary describes pods as name@node=phase.
func podSummary(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName+"="+string(p.Status.Phase))
	}
	return out
}
