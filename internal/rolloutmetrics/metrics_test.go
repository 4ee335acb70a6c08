package rolloutmetrics

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// The registered metrics follow the tracker Use points them at: a rollout
// in progress has its age, its waits and its current wait with the reason;
// an ended one is counted by Deployment and outcome and timed by outcome;
// a forgotten Deployment's counters go away.
func TestMetrics(t *testing.T) {
	Register()
	tr := NewTracker()
	stop := Use(tr, klog.Background())
	defer stop()
	collector.now = func() time.Time { return at(20) }
	defer func() { collector.now = time.Now }()

	c := newCluster("nginx:broken")
	c.rs("nginx:1", "1", at(-100))
	rs2 := c.rs("nginx:broken", "2", at(0))
	c.progressing("ReplicaSetUpdated")
	c.pod(rs2, "new-a", "ImagePullBackOff")
	tr.Observe(c.d, c.rss, c.pods, at(0))
	c.pods[0].Status.ContainerStatuses[0].State.Waiting.Reason = "ErrImagePull"
	tr.Observe(c.d, c.rss, c.pods, at(12))

	want := `
# HELP kubedeploy_deployment_rollout_age_seconds [ALPHA] Seconds since the rollout in progress of a Deployment started (its new ReplicaSet became the new one).
# TYPE kubedeploy_deployment_rollout_age_seconds gauge
kubedeploy_deployment_rollout_age_seconds{deployment="web",namespace="ns"} 20
# HELP kubedeploy_deployment_rollout_waited_seconds [ALPHA] Seconds the rollout in progress of a Deployment has spent waiting on each thing so far (scheduling, image_pull, startup, min_ready_seconds, termination, paused, partition, rollout_step, invalid_policy, controller); they add up to its age.
# TYPE kubedeploy_deployment_rollout_waited_seconds gauge
kubedeploy_deployment_rollout_waited_seconds{deployment="web",namespace="ns",waiting_on="image_pull"} 20
# HELP kubedeploy_deployment_rollout_waiting_seconds [ALPHA] Seconds the rollout in progress of a Deployment has been waiting on what it waits on now, without a change, with the reason (as kubedeploy rollout watch gives it: ImagePullBackOff, Unschedulable, NotReady, ...).
# TYPE kubedeploy_deployment_rollout_waiting_seconds gauge
kubedeploy_deployment_rollout_waiting_seconds{deployment="web",namespace="ns",reason="ErrImagePull",waiting_on="image_pull"} 8
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want),
		"kubedeploy_deployment_rollout_age_seconds", "kubedeploy_deployment_rollout_waited_seconds", "kubedeploy_deployment_rollout_waiting_seconds"); err != nil {
		t.Error(err)
	}

	n0, sum0, err := histogramOf(t, string(Failed)) // the histogram is the process's: -count=N adds up
	if err != nil {
		t.Fatal(err)
	}
	c.progressing(rolloutstate.ProgressDeadlineExceeded)
	tr.Observe(c.d, c.rss, c.pods, at(30))
	if n, err := testutil.GetCounterMetricValue(rolloutsTotal.WithLabelValues("ns", "web", string(Failed))); err != nil || n != 1 {
		t.Errorf("failed rollouts of ns/web = %v, %v; want 1", n, err)
	}
	if n, sum, err := histogramOf(t, string(Failed)); err != nil || n-n0 != 1 || sum-sum0 != 30 {
		t.Errorf("failed rollouts' durations: %d observed, sum %vs, %v; want 1 of 30s", n, sum, err)
	}
	tr.Forget(c.d.UID)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""),
		"kubedeploy_deployment_rollouts_total", "kubedeploy_deployment_rollout_age_seconds"); err != nil {
		t.Errorf("after the Deployment was forgotten: %v", err)
	}
}

// histogramOf returns the sample count and sum of rolloutDuration{outcome}.
func histogramOf(t *testing.T, outcome string) (uint64, float64, error) {
	t.Helper()
	h, err := testutil.GetHistogramMetricValue(rolloutDuration.WithLabelValues(outcome))
	if err != nil {
		return 0, 0, err
	}
	n, err := testutil.GetHistogramMetricCount(rolloutDuration.WithLabelValues(outcome))
	return n, h, err
}

// EX-5: a rollout held by a pause step reports its step and how long the pause has held it, and waits on
// rollout_step; once the steps are done neither series is sent.
func TestStepMetrics(t *testing.T) {
	Register()
	tr := NewTracker()
	stop := Use(tr, klog.Background())
	defer stop()
	collector.now = func() time.Time { return at(40) }
	defer func() { collector.now = time.Now }()

	c := newCluster("nginx:2")
	oldRS := c.rs("nginx:1", "1", at(-100))
	newRS := c.rs("nginx:2", "2", at(0))
	c.hold(newRS, oldRS, "")
	delete(c.d.Annotations, rolloutstate.RolloutPartitionAnnotation)
	c.d.Annotations[rolloutstate.RolloutStepsAnnotation] = "- setWeight: 25\n- pause: {}\n"
	c.d.Annotations[rolloutstate.RolloutStepAnnotation] = rolloutstate.StepState{Revision: 2, Step: 1, Since: metav1.NewTime(at(10))}.Encode()
	c.progressing(rolloutstate.RolloutStepPaused)
	c.pod(newRS, "new-a", "")
	tr.Observe(c.d, c.rss, c.pods, at(0))
	tr.Observe(c.d, c.rss, c.pods, at(30))

	want := `
# HELP kubedeploy_rollout_paused_seconds [ALPHA] Seconds the rollout in progress of a Deployment has been held by its current pause step (EX-5), by what ends it (waits_for: pause, a timed pause; promotion, kubedeploy rollout promote); no series while no pause step holds it.
# TYPE kubedeploy_rollout_paused_seconds gauge
kubedeploy_rollout_paused_seconds{deployment="web",namespace="ns",waits_for="promotion"} 30
# HELP kubedeploy_rollout_step [ALPHA] The current step (1-based) of the rollout in progress of a Deployment with kubedeploy.io/rollout-steps (EX-5); no series once every step is done or without steps.
# TYPE kubedeploy_rollout_step gauge
kubedeploy_rollout_step{deployment="web",namespace="ns"} 2
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "kubedeploy_rollout_step", "kubedeploy_rollout_paused_seconds"); err != nil {
		t.Error(err)
	}
	if r := tr.InProgress(at(40)); len(r) != 1 || r[0].Wait != (Wait{RolloutStep, rolloutstate.RolloutStepPaused}) {
		t.Errorf("in progress %+v, want waiting on rollout_step", r)
	}

	c.d.Annotations[rolloutstate.RolloutStepAnnotation] = rolloutstate.StepState{Revision: 2, Step: 2, Since: metav1.NewTime(at(35))}.Encode()
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(36))
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""), "kubedeploy_rollout_step", "kubedeploy_rollout_paused_seconds"); err != nil {
		t.Errorf("steps done: %v", err)
	}
}
