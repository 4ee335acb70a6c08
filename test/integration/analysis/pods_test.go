package analysis

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// podsHealthy is examples/canary-analysis.yaml's template with 4 measurements 3 s apart: 9 s, more than the 5 s
// a crash-looping pod on up runs before its first restart (controlplane.CrashLoopRunTime).
const podsHealthy = `
- name: pods-healthy
  interval: 3s
  count: 4
  successCondition: result.restarts == 0 && result.notReady == 0
  provider: {pods: {}}
`

// TestPodsAnalysis is issue 47's second "Done when" (EX-6) on the embedded control plane, no Prometheus: the
// pods provider passes a rollout whose new pods stay Ready and aborts one whose new pods restart (up's simulated
// crash loop, image tag crashloop), back to the previous revision, its ReplicaSet never above the step's 3 pods;
// the rolling-update bounds are checked at every change.
func TestPodsAnalysis(t *testing.T) {
	harness.Skip(t, env)
	stop := env.RunControllers(manager.Config{})
	t.Cleanup(func() { _ = stop() })
	ctx := harness.Context(t, 5*time.Minute)
	t.Run("StaysReadyPasses", func(t *testing.T) {
		t.Parallel()
		ns, rw, sizes := deploy(ctx, t, podsHealthy)
		harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:2")
		_, run := record(t, ns, "the analysis decided", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
		if m := run.Metric("pods-healthy"); run.Phase != rolloutstate.AnalysisSuccessful || m.Successful != 4 {
			t.Fatalf("run %+v, metric %+v; want Successful with 4", run, m)
		}
		harness.WaitComplete(t, env.Client, ns, "web", timeout)
		checkBounds(rw)
		if n := maxSize(sizes, newReplicaSet(t, ns, "nginx:2")); n != replicas {
			t.Errorf("new ReplicaSet at most %d, want %d", n, replicas)
		}
	})
	t.Run("CrashLoopIsAborted", func(t *testing.T) {
		t.Parallel()
		ns, rw, sizes := deploy(ctx, t, podsHealthy)
		harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:crashloop")
		newRS := newReplicaSet(t, ns, "nginx:crashloop")
		_, run := record(t, ns, "the analysis decided", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
		m := run.Metric("pods-healthy")
		if run.Phase != rolloutstate.AnalysisFailed || m.Failed != 1 || !strings.Contains(m.Last.Value, "restarts=") || strings.Contains(m.Last.Value, "restarts=0") {
			t.Fatalf("run %+v, metric %+v; want Failed on restarts", run, m)
		}
		harness.Eventually(t, timeout, "the rollback, complete", func(ctx context.Context) (bool, error) {
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return d.Spec.Template.Spec.Containers[0].Image == "nginx:1" && harness.DeploymentComplete(d), nil
		})
		checkBounds(rw)
		if n := maxSize(sizes, newRS); n != stepPods {
			t.Errorf("the crash-looping ReplicaSet reached %d pods, want %d", n, stepPods)
		}
		if ev := events(ctx, t, ns, deployment.AnalysisFailed); len(ev) != 1 || !strings.Contains(ev[0], "restarts=") {
			t.Errorf("AnalysisFailed events %q", ev)
		}
		t.Logf("failed on measurement %d: %s", m.Measured(), m.Last.Value)
	})
}
