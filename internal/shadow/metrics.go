package shadow

import (
	"strconv"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

var (
	// divergencesTotal counts confirmed divergences by kind.
	divergencesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_shadow_divergences_total",
		Help: "Writes kubedeploy's controllers would make at a settled state where the live controller makes none " +
			"(observe mode's shadow check), by kind (scale, create_replicaset, delete_replicaset, create_pod, delete_pod, " +
			"condition, status, annotation, ownership, spec, metadata); each is counted once, when confirmed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})

	// violationsTotal counts the live controller's ReplicaSet writes that broke a rolling-update bound.
	violationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_shadow_bound_violations_total",
		Help: "ReplicaSet writes of the live controller that broke their Deployment's rolling-update bound " +
			"(surge: above replicas + maxSurge; availability: below replicas - maxUnavailable; partition: past " +
			"kubedeploy.io/rollout-partition, which upstream ignores), seen by observe mode.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"bound"})

	// checksTotal counts the checks, by whether the Deployment was settled (only settled ones are synced).
	checksTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_shadow_checks_total",
		Help: "Shadow checks of a Deployment, by whether it was settled (true: kubedeploy's syncs ran on it; false: " +
			"a rollout in progress, not checked).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"settled"})

	// deploymentState is each Deployment's State at its last check: 1 for it, 0 for the others.
	deploymentState = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "kubedeploy_shadow_deployment_state",
		Help: "What observe mode's shadow check decided at a Deployment's last check: 1 for its state, 0 for the others " +
			"(unsettled: a rollout in progress, not synced; converged: kubedeploy would write nothing; unconfirmed: it would, " +
			"waiting for the state to stay unchanged for the quiet period; divergent: it would, confirmed and counted in " +
			"kubedeploy_shadow_divergences_total). A deleted Deployment's series are removed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "deployment", "state"})

	registerOnce sync.Once
)

// Register registers the shadow check's metrics in the legacy registry, once per process, each label value
// at 0 so that a rate or an alert over them has a series from the start.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(divergencesTotal, violationsTotal, checksTotal, deploymentState)
		for _, k := range Kinds {
			divergencesTotal.WithLabelValues(string(k)).Add(0)
		}
		for _, b := range Bounds {
			violationsTotal.WithLabelValues(string(b)).Add(0)
		}
	})
}

// Publish makes w's findings the process's: each divergence and each violation is counted and logged (at
// info level: the shadow check exists to find them) with logger, each check counted and each Deployment's
// State kept in kubedeploy_shadow_deployment_state. A failed check is logged by the runner that retries it,
// as the controllers' failed syncs are.
func Publish(w *Watcher, logger klog.Logger) {
	w.OnDivergence = func(key cache.ObjectName, d Divergence) {
		divergencesTotal.WithLabelValues(string(d.Kind)).Inc()
		logger.Info("Shadow check: kubedeploy would write where the live controller does not", "deployment", klog.KRef(key.Namespace, key.Name),
			"kind", d.Kind, "object", d.Object, "field", d.Field, "live", d.Live, "kubedeploy", d.Kubedeploy, "count", d.Count)
	}
	w.OnViolation = func(key cache.ObjectName, v Violation) {
		violationsTotal.WithLabelValues(string(v.Bound)).Inc()
		logger.Info("Shadow check: the live controller broke a rolling-update bound", "deployment", klog.KRef(key.Namespace, key.Name),
			"bound", v.Bound, "replicaSet", v.ReplicaSet, "detail", v.Detail)
	}
	w.OnCheck = func(r Report) { checksTotal.WithLabelValues(strconv.FormatBool(r.Settled)).Inc() }
	w.OnState = setDeploymentState
}

// setDeploymentState makes s the state of key in kubedeploy_shadow_deployment_state; StateForgotten removes
// key's series.
func setDeploymentState(key cache.ObjectName, s State) {
	for _, st := range States {
		if s == StateForgotten {
			deploymentState.DeleteLabelValues(key.Namespace, key.Name, string(st))
			continue
		}
		v := 0.0
		if st == s {
			v = 1
		}
		deploymentState.WithLabelValues(key.Namespace, key.Name, string(st)).Set(v)
	}
}
