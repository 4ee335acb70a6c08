package analysis

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// backgroundRate is errorRate for the background: its first measurement 6 s after the rollout's first step
// started (the new pods' traffic is then in Prometheus: a measurement before it would be empty, Inconclusive),
// then every 2 s, 10 in all.
const backgroundRate = `
- name: error-rate
  initialDelay: 6s
  interval: 2s
  count: 10
  successCondition: result < 0.05
  provider:
    prometheus:
      query: |
        (sum(rate(http_requests_total{code="500",pod_template_hash="{{ .NewPodTemplateHash }}"}[5s])) or vector(0))
        / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[5s]))
`

// backgroundAbortsDuringPause: steps 30% → pause 60 s with kubedeploy.io/rollout-analysis: error-rate (EX-6's
// background analysis). A bad image (40% 5xx) is aborted by the background run while the pause holds (long
// before it ends), rolled back, its ReplicaSet never above 3 pods; the events name the background analysis.
func backgroundAbortsDuringPause(ctx context.Context, t *testing.T) {
	ns, rw, sizes := deployWith(ctx, t, backgroundRate, map[string]string{
		rolloutstate.RolloutStepsAnnotation:    "- setWeight: 30\n- pause: {duration: 60s}\n",
		rolloutstate.RolloutAnalysisAnnotation: "error-rate",
	})
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:bad")
	newRS := newReplicaSet(t, ns, "nginx:bad")
	var run *rolloutstate.AnalysisRun
	harness.Eventually(t, timeout, "the rollback to nginx:1, complete", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rec := rolloutstate.AnalysisRecordOf(d, 2)
		if r := rec.Run(rolloutstate.BackgroundRun); r != nil {
			run = r
		}
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1" && harness.DeploymentComplete(d), nil
	})
	if run == nil || run.Phase != rolloutstate.AnalysisFailed || run.Metric("error-rate").Last == nil {
		t.Fatalf("background run %+v, want Failed", run)
	}
	failedAt := run.Metric("error-rate").Last.At.Time
	t.Logf("background analysis started %s, failed measurement %.1f s later (%s)", run.Since.Format("15:04:05"), failedAt.Sub(run.Since.Time).Seconds(), run.Metric("error-rate").Last.Value)
	if late := failedAt.Sub(run.Since.Time).Seconds(); late > 30 {
		t.Errorf("the background run failed %.1f s after it started, not within the 60 s pause's first half", late)
	}
	checkBounds(rw)
	if n := maxSize(sizes, newRS); n != stepPods {
		t.Errorf("the bad ReplicaSet reached %d pods, want at most (and exactly) %d", n, stepPods)
	}
	if ev := events(ctx, t, ns, deployment.AnalysisFailed); len(ev) != 1 || !strings.Contains(ev[0], "the background analysis error-rate is Failed") {
		t.Errorf("AnalysisFailed events %q", ev)
	}
}
