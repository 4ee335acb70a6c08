package analysis

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
	"github.com/kubedeploy/kubedeploy/internal/testing/promserver"
)

// TestAnalysisAgainstPrometheus is issue 47's first "Done when" (EX-5, EX-6) on the embedded control plane
// with a real Prometheus: 30% → pause 10 s → analysis (result < 0.05, 3 measurements 2 s apart) → 100%. A good
// image completes; a bad one (40% 5xx) is aborted by the analysis and rolled back, its ReplicaSet never above 3
// pods, within initialDelay + (failureLimit+1) × interval + 10 s of the analysis starting; an empty result is
// Inconclusive, not success; with Prometheus stopped a good image stays at 30% and goes on after Prometheus is
// back and a promote. And the background analysis (kubedeploy.io/rollout-analysis) aborts a bad image during a
// pause. The rolling-update bounds are checked at every ReplicaSet change throughout.
func TestAnalysisAgainstPrometheus(t *testing.T) {
	ctx := harness.Context(t, 10*time.Minute)
	w := newWorld(ctx, t)
	t.Run("parallel", func(t *testing.T) {
		t.Run("GoodImageCompletes", func(t *testing.T) { t.Parallel(); goodImageCompletes(ctx, t) })
		t.Run("BadImageIsAbortedInTime", func(t *testing.T) { t.Parallel(); badImageIsAborted(ctx, t) })
		t.Run("EmptyResultIsInconclusive", func(t *testing.T) { t.Parallel(); emptyResultIsInconclusive(ctx, t) })
		t.Run("BackgroundAbortsDuringPause", func(t *testing.T) { t.Parallel(); backgroundAbortsDuringPause(ctx, t) })
	})
	t.Run("PrometheusDownHoldsUntilBackAndPromoted", func(t *testing.T) { w.prometheusDown(ctx, t) })
}

func goodImageCompletes(ctx context.Context, t *testing.T) {
	ns, rw, sizes := deploy(ctx, t, errorRate)
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:2")
	_, run := record(t, ns, "the analysis Successful", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisSuccessful || m.Successful != 3 || m.Last == nil || m.Last.Value != "0" {
		t.Fatalf("run %+v, metric %+v; want Successful, 3 of 3 at 0", run, m)
	}
	harness.WaitComplete(t, env.Client, ns, "web", timeout)
	checkBounds(rw)
	if n := maxSize(sizes, newReplicaSet(t, ns, "nginx:2")); n != replicas {
		t.Errorf("new ReplicaSet at most %d, want %d", n, replicas)
	}
	if ev := events(ctx, t, ns, deployment.AnalysisSuccessful); len(ev) != 1 || !strings.Contains(ev[0], "error-rate 3/3 successful") {
		t.Errorf("AnalysisSuccessful events %q", ev)
	}
}

// issueBound is initialDelay (0) + (failureLimit (0) + 1) × interval (2 s) + 10 s: the latest an abort may come
// after the analysis started.
const issueBound = 0 + (0+1)*2*time.Second + 10*time.Second

func badImageIsAborted(ctx context.Context, t *testing.T) {
	ns, rw, sizes := deploy(ctx, t, errorRate)
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:bad")
	newRS := newReplicaSet(t, ns, "nginx:bad")
	d, run := record(t, ns, "the analysis Failed and the rollout aborted", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
	harness.Eventually(t, timeout, "the rollback to nginx:1, complete", func(ctx context.Context) (bool, error) {
		var err error
		if d, err = env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1" && harness.DeploymentComplete(d), nil
	})
	aborted := time.Now()
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisFailed || m.Failed != 1 || m.Successful != 0 || m.Last.Value != "0.4" {
		t.Fatalf("run %+v, metric %+v; want Failed on one measurement of 0.4", run, m)
	}
	if d.Annotations[rolloutstate.FailedRevisionAnnotation] != "2" {
		t.Errorf("failed-revision %q, want 2", d.Annotations[rolloutstate.FailedRevisionAnnotation])
	}
	failedAt := run.Metric("error-rate").Last.At.Time
	t.Logf("analysis started %s, failed measurement at %s (%.1f s), rollback complete seen %.1f s after the start",
		run.Since.Format(time.RFC3339), failedAt.Format(time.RFC3339), failedAt.Sub(run.Since.Time).Seconds(), aborted.Sub(run.Since.Time).Seconds())
	if late := failedAt.Sub(run.Since.Time); late > issueBound {
		t.Errorf("the failing measurement came %s after the analysis started, past %s", late, issueBound)
	}
	checkBounds(rw)
	if n := maxSize(sizes, newRS); n != stepPods {
		t.Errorf("the bad ReplicaSet reached %d pods, want at most (and exactly) %d", n, stepPods)
	}
	for reason, part := range map[string]string{deployment.AnalysisFailed: `"error-rate": result 0.4`, deployment.RolloutAborted: "as its analysis failed"} {
		if ev := events(ctx, t, ns, reason); len(ev) != 1 || !strings.Contains(ev[0], part) {
			t.Errorf("%s events %q, want one with %q", reason, ev, part)
		}
	}
}

func emptyResultIsInconclusive(ctx context.Context, t *testing.T) {
	ns, rw, sizes := deploy(ctx, t, errorsOnly)
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:2")
	d, run := record(t, ns, "the analysis decided", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisInconclusive || m.Inconclusive != 1 || m.Successful != 0 {
		t.Fatalf("run %+v, metric %+v; want Inconclusive on one empty result", run, m)
	}
	if c := progressing(d); c.Reason != rolloutstate.RolloutAnalysisPaused {
		t.Errorf("Progressing %s %q, want %s", c.Reason, c.Message, rolloutstate.RolloutAnalysisPaused)
	}
	time.Sleep(3 * time.Second) // a held rollout stays held: nothing more measured or scaled
	checkBounds(rw)
	if n := maxSize(sizes, newReplicaSet(t, ns, "nginx:2")); n != stepPods {
		t.Errorf("new ReplicaSet reached %d pods while the analysis was inconclusive, want %d", n, stepPods)
	}
	_, run = record(t, ns, "the record", func(*rolloutstate.AnalysisRun) bool { return true })
	if m := run.Metric("error-rate"); m.Inconclusive != 1 || m.Measured() != 1 {
		t.Errorf("metric %+v after the hold: want no measurement after the verdict", m)
	}
}

// prometheusDown stops Prometheus while the rollout pauses before the analysis: every measurement is an Error,
// the rollout holds at 30% until the errors pass consecutiveErrorLimit (4) and then waits for a human; with
// Prometheus back (same address), a promote goes on to completion.
func (w *world) prometheusDown(ctx context.Context, t *testing.T) {
	ns, rw, sizes := deploy(ctx, t, errorRate)
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:2")
	harness.Eventually(t, timeout, "the pause step", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, ok := rolloutstate.StepStateOf(d)
		return ok && st.Revision == 2 && st.Step == 1, nil
	})
	addr := w.prom.Address()
	w.prom.Stop()
	d, run := record(t, ns, "the analysis decided without Prometheus", func(run *rolloutstate.AnalysisRun) bool { return run.Phase != "" })
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisError || m.Error != 5 || m.Measured() != 0 {
		t.Fatalf("run %+v, metric %+v; want Error after 5 errors and nothing measured", run, m)
	}
	if c := progressing(d); c.Reason != rolloutstate.RolloutAnalysisPaused || d.Status.UpdatedReplicas != stepPods {
		t.Fatalf("Progressing %s, %d updated; want %s at %d", c.Reason, d.Status.UpdatedReplicas, rolloutstate.RolloutAnalysisPaused, stepPods)
	}
	w.prom = promserver.Run(ctx, t, promserver.Config{Targets: []string{w.exp.Target()}, Address: addr})
	promote(ctx, t, ns)
	harness.WaitComplete(t, env.Client, ns, "web", timeout)
	checkBounds(rw)
	if ev := events(ctx, t, ns, deployment.AnalysisPaused); len(ev) != 1 || !strings.Contains(ev[0], "is Error on metric") {
		t.Errorf("AnalysisPaused events %q", ev)
	}
	if n := maxSize(sizes, newReplicaSet(t, ns, "nginx:2")); n != replicas {
		t.Errorf("new ReplicaSet at most %d after the promote, want %d", n, replicas)
	}
}
