package skew

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestPlanAndObserveAgreeWithTheController (IM-8, issue 44): on a "v1.37" API server (futureServer) a Deployment's
// pod template has fields kubedeploy's v1.36 API does not know, which the controller folds into the
// pod-template-hash and copies into ReplicaSets and pods. `rollout plan` and observe mode's shadow check run the
// controller's own syncs through the recording client (dryrun) and must judge as the controller does:
//   - `rollout plan --image` names the ReplicaSet the controller then creates and predicts the sizes it writes to
//     the new and the old ReplicaSet, exactly (maxSurge 1, maxUnavailable 0: one pod per step);
//   - `observe --once` finds the Deployment settled with no divergence after that rollout, and after revision 3,
//     whose typed template is revision 1's and differs only in an unknown field's value: only a check that counts
//     that field, as the controller does, takes revision 3's ReplicaSet for the new one.
func TestPlanAndObserveAgreeWithTheController(t *testing.T) {
	r := startFutureRun(t)
	fs, ns, ctx, deployments := r.fs, r.ns, r.ctx, r.deployments
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(futureDeployment(ns, "agree", ""))); err != nil {
		t.Fatal(err)
	}
	if _, err := deployments.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "agree", time.Minute)
	rs1 := onlyReplicaSet(ctx, t, ns, "agree", "")

	rs2 := checkPlanAgrees(ctx, t, fs, deployments, ns, rs1)
	checkObserveAgrees(ctx, t, fs, ns)

	// Revision 3: nginx:1 again (revision 1's typed template) with someFutureField's mode changed.
	setFutureFieldAndImage(ctx, t, deployments, "loose", "nginx:1")
	waitRolledOut(t, ns, "agree", rs1, rs2)
	checkObserveAgrees(ctx, t, fs, ns)
}

// checkPlanAgrees plans `--image web=nginx:2` for Deployment ns/agree (its ReplicaSet rs1) through fs, then makes
// that change as `kubectl set image` does (a strategic merge patch, which keeps the unknown fields) and checks that
// the controller created the planned ReplicaSet, with the template as stored, and wrote the planned sizes. It
// returns the new ReplicaSet's name.
func checkPlanAgrees(ctx context.Context, t *testing.T, fs *futureServer, deployments dynamic.ResourceInterface, ns, rs1 string) string {
	t.Helper()
	p := harness.RolloutPlan(ctx, t, fs.kubeconfig(t, ns), ns, "agree", "--image", "web=nginx:2")
	if !p.Complete || p.NewReplicaSet == "" || !slices.Equal(p.OldReplicaSets, []string{rs1}) {
		t.Fatalf("plan: %+v", p)
	}
	sizes := harness.WatchReplicaSetSizes(ctx, t, env.Client, ns)
	defer sizes.Stop()
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}`)
	if _, err := deployments.Patch(ctx, "agree", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rs2 := waitRolledOut(t, ns, "agree", rs1)
	if rs2 != p.NewReplicaSet {
		t.Errorf("the controller created ReplicaSet %s; rollout plan named %s", rs2, p.NewReplicaSet)
	}
	if got := fs.unknown("replicasets", ns, rs2); len(got) != len(templateFutureFields) {
		t.Errorf("ReplicaSet %s was created with unknown fields %v, want the template's %d", rs2, got, len(templateFutureFields))
	}
	gotNew, wantNew := sizes.Of(rs2), p.NewReplicaSetSizes()
	// The watch starts at the old ReplicaSet's 3 and records each size once in a row.
	gotOld, wantOld := sizes.Of(rs1), slices.Compact(append([]int32{3}, p.OldReplicaSetSizes(0)...))
	if !slices.Equal(gotNew, wantNew) || !slices.Equal(gotOld, wantOld) {
		t.Errorf("sizes: new %s: controller %v, plan %v; old %s: controller %v, plan %v", rs2, gotNew, wantNew, rs1, gotOld, wantOld)
	}
	return rs2
}

// checkObserveAgrees runs `observe --once` on ns through fs and wants every Deployment checked, settled, with no
// divergence.
func checkObserveAgrees(_ context.Context, t *testing.T, fs *futureServer, ns string) {
	t.Helper()
	// An old pod may still be terminating once the ReplicaSets are rolled out; observe judges nothing unsettled,
	// so wait for the Deployment to settle, then check what it says.
	var r manager.OnceReport
	harness.Eventually(t, 30*time.Second, "observe --once to find the Deployment settled", func(ctx context.Context) (bool, error) {
		var err error
		r, err = manager.ObserveOnce(ctx, manager.Config{RESTConfig: fs.restConfig(), QPS: 20, Burst: 30, Version: "test"}, ns)
		return err == nil && len(r.Unsettled) == 0, err
	})
	if r.Checked != 1 || len(r.Unsettled) != 0 || len(r.Divergent) != 0 {
		var divergences []string
		for _, rep := range r.Divergent {
			for _, d := range rep.Divergences {
				divergences = append(divergences, d.String())
			}
		}
		t.Errorf("observe --once: %d checked, unsettled %v, divergences:\n%s", r.Checked, r.Unsettled, strings.Join(divergences, "\n"))
	}
}

// setFutureFieldAndImage replaces Deployment "agree" through deployments with one whose someFutureField has mode
// and whose container runs image (a PUT of JSON).
func setFutureFieldAndImage(ctx context.Context, t *testing.T, deployments dynamic.ResourceInterface, mode, image string) {
	t.Helper()
	d, err := deployments.Get(ctx, "agree", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["someFutureField"] = map[string]any{"mode": mode}
	spec["containers"].([]any)[0].(map[string]any)["image"] = image
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRolledOut waits until Deployment ns/name has observed its generation, is complete, and has one ReplicaSet
// with replicas besides those named in old, which are at 0; it returns that ReplicaSet's name.
func waitRolledOut(t *testing.T, ns, name string, old ...string) string {
	t.Helper()
	var current string
	harness.Eventually(t, 2*time.Minute, "the rollout of "+name+" complete, the old ReplicaSets at 0", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		current = ""
		for _, rs := range rss.Items {
			size := *rs.Spec.Replicas
			switch {
			case slices.Contains(old, rs.Name) && (size != 0 || rs.Status.Replicas != 0):
				return false, nil
			case !slices.Contains(old, rs.Name) && size > 0:
				current = rs.Name
			}
		}
		return current != "" && d.Status.ObservedGeneration == d.Generation && harness.DeploymentComplete(d) &&
			d.Status.Replicas == *d.Spec.Replicas, nil
	})
	return current
}

// kubeconfig writes a kubeconfig for s (namespace ns) into a temporary directory of t and returns its path.
func (s *futureServer) kubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["future"] = &clientcmdapi.Cluster{Server: s.URL}
	cfg.AuthInfos["future"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["future"] = &clientcmdapi.Context{Cluster: "future", AuthInfo: "future", Namespace: ns}
	cfg.CurrentContext = "future"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
