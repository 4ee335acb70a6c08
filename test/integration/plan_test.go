package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The tests in this file check `kubedeploy rollout plan` and `rollout watch`
// (issue 11) on the shared cluster: a plan writes nothing and reads -f
// manifests, and watch follows good and stuck rollouts. That the controllers
// then take exactly the planned steps is checked on a cluster timed as `up`
// is, in test/integration/upplan.

// plan runs `rollout plan deploy/NAME -o json ARGS…` against the shared
// cluster, with the harness's pod startup delay.
func plan(ctx context.Context, t *testing.T, ns, name string, args ...string) simulator.Plan {
	t.Helper()
	return harness.RolloutPlan(ctx, t, env.ControlPlane.KubeconfigPath(), ns, name, append([]string{"--pod-startup", "0.2"}, args...)...)
}

// A plan never writes: the Deployment and its ReplicaSets keep their
// resourceVersions.
func TestPlanWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx", 4, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	before := fmt.Sprint(d.ResourceVersion, harness.OwnedReplicaSets(ctx, t, env.Client, d)[0].ResourceVersion)
	plan(ctx, t, ns, d.Name, "--image", "nginx=nginx:1.9.3")
	after, err := env.Client.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(after.ResourceVersion, harness.OwnedReplicaSets(ctx, t, env.Client, after)[0].ResourceVersion); got != before {
		t.Errorf("resourceVersions %s → %s after a plan", before, got)
	}
}

// -f with a changed manifest: the API server defaults it in a dry run, so a
// manifest equal to the live spec plans no rollout and one with a new image
// plans the same rollout as --image.
func TestPlanFromManifest(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx", 8, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	manifest := func(image string) string {
		m := harness.NewDeployment(ns, "nginx", 8, image)
		m.APIVersion, m.Kind = "apps/v1", "Deployment"
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "d.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	same := plan(ctx, t, ns, d.Name, "-f", manifest("nginx:1.9"))
	if !same.Complete || len(same.Steps) != 0 {
		t.Errorf("unchanged manifest: %+v", same)
	}
	fromFile := plan(ctx, t, ns, d.Name, "-f", manifest("nginx:1.9.3"))
	fromFlag := plan(ctx, t, ns, d.Name, "--image", "nginx=nginx:1.9.3")
	if fromFile.NewReplicaSet != fromFlag.NewReplicaSet || !slices.Equal(fromFile.NewReplicaSetSizes(), fromFlag.NewReplicaSetSizes()) {
		t.Errorf("-f plan %+v differs from --image plan %+v", fromFile, fromFlag)
	}
}

// watchOut runs `rollout watch deploy/NAME` against the shared cluster and
// returns its output and error once it ends.
func watchOut(ctx context.Context, ns, name string, args ...string) (string, error) {
	cmd := rollout.NewCommand(rollout.Options{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"watch", "deploy/" + name, "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// Issue 11: `rollout watch` follows a good rollout to completion (exit 0)
// and, on an nginx:broken rollout, names every stuck pod of the new
// ReplicaSet under ImagePullBackOff and fails at the progress deadline.
func TestWatchGoodAndStuckRollouts(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "web", 4, "nginx:1.9")
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](4)
	d = createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)

	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	out, err := watchOut(ctx, ns, d.Name, "--timeout", "1m")
	if err != nil || !strings.Contains(out, `deployment "web" successfully rolled out`) {
		t.Fatalf("good rollout: %v\n%s", err, out)
	}

	setImage(ctx, t, ns, d.Name, d.Name, "nginx:broken")
	out, err = watchOut(ctx, ns, d.Name, "--timeout", "1m")
	if err == nil || !strings.Contains(err.Error(), "exceeded its progress deadline") {
		t.Fatalf("broken rollout: error %v\n%s", err, out)
	}
	newRS, ok := replicaSetsByRevision(ctx, t, d)["3"]
	if !ok {
		t.Fatal("no ReplicaSet at revision 3")
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stuck := 0
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == newRS.UID {
			stuck++
			if !strings.Contains(out, p.Name) {
				t.Errorf("stuck pod %s not named:\n%s", p.Name, out)
			}
		}
	}
	if want := fmt.Sprintf("why: %d ImagePullBackOff: ", stuck); stuck == 0 || !strings.Contains(out, want) {
		t.Errorf("want %q (%d stuck pods) in:\n%s", want, stuck, out)
	}
	if !strings.Contains(out, `(container web: Back-off pulling image "nginx:broken")`) {
		t.Errorf("no container message in:\n%s", out)
	}
	t.Logf("watch output:\n%s", out)
}
