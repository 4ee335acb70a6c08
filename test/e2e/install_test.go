package e2e

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/deploy"
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
	selector := "app.kubernetes.io/name=kubedeploy-controllers"
	waitPodsRunning(t, client, deploy.Namespace, selector, 2)
	list, err := client.CoreV1().Pods(deploy.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	pods := list.Items
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
