package rolloutmetrics

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

var (
	// rolloutsTotal counts ended rollouts by Deployment and outcome.
	rolloutsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_deployment_rollouts_total",
		Help: "Rollouts that ended, by namespace, Deployment and outcome (complete, failed: ProgressDeadlineExceeded, " +
			"rolled_back: an older ReplicaSet became the new one, superseded: a newer one did); a Deployment's series go " +
			"away when it is deleted.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "deployment", "outcome"})

	// rolloutDuration is the time from a ReplicaSet becoming a Deployment's new one to its rollout's end.
	rolloutDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name: "kubedeploy_deployment_rollout_duration_seconds",
		Help: "Time from a ReplicaSet becoming a Deployment's new one to its rollout ending, in seconds, by outcome " +
			"(complete, failed, rolled_back, superseded).",
		Buckets:        metrics.ExponentialBuckets(0.5, 2, 14), // 0.5s .. ~68min
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})

	// Collected at scrape time from the tracker: one series per rollout in progress.
	ageDesc = metrics.NewDesc("kubedeploy_deployment_rollout_age_seconds",
		"Seconds since the rollout in progress of a Deployment started (its new ReplicaSet became the new one).",
		[]string{"namespace", "deployment"}, nil, metrics.ALPHA, "")
	waitedDesc = metrics.NewDesc("kubedeploy_deployment_rollout_waited_seconds",
		"Seconds the rollout in progress of a Deployment has spent waiting on each thing so far (scheduling, image_pull, "+
			"startup, min_ready_seconds, termination, paused, partition, rollout_step, invalid_policy, controller); they add up to its age.",
		[]string{"namespace", "deployment", "waiting_on"}, nil, metrics.ALPHA, "")
	waitingDesc = metrics.NewDesc("kubedeploy_deployment_rollout_waiting_seconds",
		"Seconds the rollout in progress of a Deployment has been waiting on what it waits on now, without a change, "+
			"with the reason (as kubedeploy rollout watch gives it: ImagePullBackOff, Unschedulable, NotReady, ...).",
		[]string{"namespace", "deployment", "waiting_on", "reason"}, nil, metrics.ALPHA, "")

	stepDesc = metrics.NewDesc("kubedeploy_rollout_step",
		"The current step (1-based) of the rollout in progress of a Deployment with kubedeploy.io/rollout-steps (EX-5); "+
			"no series once every step is done or without steps.",
		[]string{"namespace", "deployment"}, nil, metrics.ALPHA, "")
	pausedDesc = metrics.NewDesc("kubedeploy_rollout_paused_seconds",
		"Seconds the rollout in progress of a Deployment has been held by its current pause step (EX-5), by what ends "+
			"it (waits_for: pause, a timed pause; promotion, kubedeploy rollout promote); no series while no pause step holds it.",
		[]string{"namespace", "deployment", "waits_for"}, nil, metrics.ALPHA, "")

	// Collected at scrape time from the tracker's Analyses (EX-6): per metric of the current revision's analysis
	// runs (at most rolloutstate.MaxAnalysisMetrics per run), and per run that holds a rollout.
	measurementsDesc = metrics.NewDesc("kubedeploy_analysis_measurements_total",
		"Measurements of a metric of a Deployment's analyses (EX-6) by phase (Successful, Failed, Inconclusive, Error), "+
			"as recorded on the Deployment (kubedeploy.io/rollout-analysis-state) for its current revision, summed over its runs; "+
			"it only grows within a revision and starts over with the next revision's analyses, which rate() and increase() "+
			"take as a counter reset, as after a process restart.",
		[]string{"namespace", "deployment", "metric", "phase"}, nil, metrics.ALPHA, "")
	lastValueDesc = metrics.NewDesc("kubedeploy_analysis_last_value",
		"The value of the last measurement of a metric of a Deployment's analyses (EX-6), when it is a finite number "+
			"(a Prometheus query's result); no series otherwise (the pods provider, an error, NaN).",
		[]string{"namespace", "deployment", "metric"}, nil, metrics.ALPHA, "")
	runDesc = metrics.NewDesc("kubedeploy_analysis_run_seconds",
		"Seconds an analysis run (EX-6) has held the rollout in progress of a Deployment, by run (step-N, background) "+
			"and phase: Running, since it started; Inconclusive or Error, waiting for a human (kubedeploy rollout promote "+
			"or abort), since the measurement that decided it. No series for a run that does not hold the rollout.",
		[]string{"namespace", "deployment", "run", "phase"}, nil, metrics.ALPHA, "")

	registerOnce sync.Once
	// collector is the process's collector of the in-progress gauges; Use attaches trackers to it.
	collector = &inProgressCollector{now: time.Now}
)

// Register registers the rollout metrics in the legacy registry (component-base), once per process.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rolloutsTotal, rolloutDuration)
		legacyregistry.CustomMustRegister(collector)
	})
}

// Use adds t to the process's rollout metrics: its ended rollouts are
// counted and logged at V(2) with logger, and from the next scrape on until
// stop is called its rollouts in progress are reported beside those of the
// other trackers in use (one per controller set; in sharded mode a process
// runs several, over disjoint namespaces). A Deployment that two trackers
// both have in progress is reported from the one added first (Attached).
// stop removes t only; calling it again is harmless. Use sets t.OnEnd and
// t.OnForget.
func Use(t *Tracker, logger klog.Logger) (stop func()) {
	t.OnEnd = func(e Ended) {
		rolloutsTotal.WithLabelValues(e.Namespace, e.Deployment, string(e.Outcome)).Inc()
		rolloutDuration.WithLabelValues(string(e.Outcome)).Observe(e.Duration().Seconds())
		logger.V(2).Info("Rollout ended", "deployment", klog.KRef(e.Namespace, e.Deployment), "replicaSet", e.ReplicaSet,
			"revision", e.Revision, "outcome", e.Outcome, "duration", e.Duration().Round(time.Millisecond), "waited", e.Waited)
	}
	t.OnForget = func(namespace, name string) {
		for _, o := range []Outcome{Complete, Failed, RolledBack, Superseded} {
			rolloutsTotal.DeleteLabelValues(namespace, name, string(o))
		}
	}
	return collector.trackers.Add(t)
}

// inProgressCollector reports the rollouts in progress of the trackers in use at scrape time.
type inProgressCollector struct {
	metrics.BaseStableCollector

	// now is the clock the waits are brought up to; a test seam.
	now      func() time.Time
	trackers Attached[Tracker]
}

// DescribeWithStability sends the eight descriptors.
func (c *inProgressCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{ageDesc, waitedDesc, waitingDesc, stepDesc, pausedDesc, measurementsDesc, lastValueDesc, runDesc} {
		ch <- d
	}
}

// deployment is a Deployment's namespace and name.
type deployment struct{ namespace, name string }

// CollectWithStability sends, per rollout in progress, its age, its waits so far and its current wait, and per
// Deployment with analyses (EX-6) their measurements and the runs that hold it. Each Deployment (namespace and
// name) is sent once, from the first tracker in use that has it.
func (c *inProgressCollector) CollectWithStability(ch chan<- metrics.Metric) {
	now := c.now()
	trackers := c.trackers.All()
	sent := map[deployment]bool{}
	for _, t := range trackers {
		for _, r := range t.InProgress(now) {
			if d := (deployment{r.Namespace, r.Deployment}); !sent[d] {
				sent[d] = true
				sendInProgress(ch, r, now)
			}
		}
	}
	sent = map[deployment]bool{}
	for _, t := range trackers {
		for _, a := range t.Analyses() {
			if d := (deployment{a.Namespace, a.Deployment}); !sent[d] {
				sent[d] = true
				sendAnalysis(ch, a, now)
			}
		}
	}
}

// sendInProgress sends r's age, its waits so far and its current wait, brought up to now, and with rollout
// steps (EX-5) its step and how long a pause step has held it.
func sendInProgress(ch chan<- metrics.Metric, r Rollout, now time.Time) {
	ch <- metrics.NewLazyConstMetric(ageDesc, metrics.GaugeValue, now.Sub(r.Start).Seconds(), r.Namespace, r.Deployment)
	for on, d := range r.Waited {
		ch <- metrics.NewLazyConstMetric(waitedDesc, metrics.GaugeValue, d.Seconds(), r.Namespace, r.Deployment, string(on))
	}
	ch <- metrics.NewLazyConstMetric(waitingDesc, metrics.GaugeValue, now.Sub(r.WaitSince).Seconds(),
		r.Namespace, r.Deployment, string(r.Wait.On), r.Wait.Reason)
	if r.Step > 0 {
		ch <- metrics.NewLazyConstMetric(stepDesc, metrics.GaugeValue, float64(r.Step), r.Namespace, r.Deployment)
	}
	if !r.PausedSince.IsZero() {
		ch <- metrics.NewLazyConstMetric(pausedDesc, metrics.GaugeValue, max(0, now.Sub(r.PausedSince).Seconds()),
			r.Namespace, r.Deployment, string(r.PauseWaitsFor))
	}
}

// sendAnalysis sends a's measurement counts (every phase, 0 included), its metrics' last values that are numbers,
// and the runs that hold its rollout, brought up to now.
func sendAnalysis(ch chan<- metrics.Metric, a Analysis, now time.Time) {
	for _, m := range a.Metrics {
		for _, p := range measurementPhases {
			ch <- metrics.NewLazyConstMetric(measurementsDesc, metrics.CounterValue, float64(countOf(m, p)),
				a.Namespace, a.Deployment, m.Name, string(p))
		}
		if v, ok := lastValue(m); ok {
			ch <- metrics.NewLazyConstMetric(lastValueDesc, metrics.GaugeValue, v, a.Namespace, a.Deployment, m.Name)
		}
	}
	for _, r := range a.Runs {
		ch <- metrics.NewLazyConstMetric(runDesc, metrics.GaugeValue, max(0, now.Sub(r.Since).Seconds()),
			a.Namespace, a.Deployment, r.Run, string(r.Phase))
	}
}
