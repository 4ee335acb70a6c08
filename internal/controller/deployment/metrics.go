package deployment

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

var (
	// rolloutDuration is the time from a new ReplicaSet's creation (the
	// template change that started the rollout) to the Deployment reporting
	// Progressing=True/rolloutstate.NewReplicaSetAvailable (ST-14), in seconds.
	rolloutDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name:           "kubedeploy_deployment_rollout_duration_seconds",
		Help:           "Time from a Deployment's new ReplicaSet being created to the rollout being complete (rolloutstate.NewReplicaSetAvailable), in seconds.",
		Buckets:        metrics.ExponentialBuckets(0.5, 2, 14), // 0.5s .. ~68min
		StabilityLevel: metrics.ALPHA,
	})

	registerMetricsOnce sync.Once
)

// registerMetrics registers this package's metrics in the legacy registry
// (component-base), once per process; New calls it, as the expectations
// package's constructors register theirs.
func registerMetrics() {
	registerMetricsOnce.Do(func() { legacyregistry.MustRegister(rolloutDuration) })
}

// observeRolloutComplete gives observe the rollout duration when a status
// write has just moved the Deployment to Progressing reason
// rolloutstate.NewReplicaSetAvailable (prev is the status before the write): now −
// newRS.CreationTimestamp, in seconds. A nil observe (NewSyncer's) records nothing.
func observeRolloutComplete(observe func(float64), prev, cur appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, now time.Time) {
	if observe == nil || newRS == nil || progressingReason(prev) == rolloutstate.NewReplicaSetAvailable || progressingReason(cur) != rolloutstate.NewReplicaSetAvailable {
		return
	}
	observe(now.Sub(newRS.CreationTimestamp.Time).Seconds())
}

func progressingReason(s appsv1.DeploymentStatus) string {
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Reason
		}
	}
	return ""
}
