package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubedeploy/kubedeploy/internal/rolloutmetrics"

	// client-go workqueue metrics (workqueue_depth, workqueue_work_duration_seconds, ...) per queue name.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	// leader_election_master_status{name} and leader_election_slowpath_total from client-go's leaderelection.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
)

// Sync results, the "result" label of kubedeploy_controller_sync_duration_seconds.
const (
	resultSuccess = "success"
	resultError   = "error"
)

var (
	// syncDuration is the time one sync of one key took, per controller and result, in seconds.
	syncDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "kubedeploy_controller_sync_duration_seconds",
		Help:           "Time one controller sync of one object key took, in seconds, by controller and result (success or error).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15), // 1ms .. ~16s
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "result"})

	registerOnce sync.Once
)

// syncObserver implements runner.Observer with syncDuration.
type syncObserver struct{}

// SyncDone records one finished sync.
func (syncObserver) SyncDone(controller string, d time.Duration, err error) {
	result := resultSuccess
	if err != nil {
		result = resultError
	}
	syncDuration.WithLabelValues(controller, result).Observe(d.Seconds())
}

// registerMetrics registers the manager's own metrics in the legacy
// registry, once per process: syncDuration, the
// kubedeploy_deployment_unavailable_pods collector (unavailablePods) and the
// rollout metrics (rolloutmetrics); the controller packages register theirs
// when built. Controllers get syncObserver through their Config.
func registerMetrics() {
	rolloutmetrics.Register()
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncDuration)
		legacyregistry.CustomMustRegister(unavailablePods, unsupportedFields)
		legacyregistry.MustRegister(serverVersionSkew)
	})
}

// startRolloutMetrics makes the process's rollout metrics (rolloutmetrics)
// follow factory's Deployments, ReplicaSets and pods: call it before the
// factory starts, run the feeder, and call stop when done. It returns the
// informers' error when the feeder cannot be attached.
func startRolloutMetrics(ctx context.Context, factory informers.SharedInformerFactory) (*rolloutmetrics.Feeder, func(), error) {
	tracker := rolloutmetrics.NewTracker()
	feeder, err := rolloutmetrics.NewFeeder(tracker, rolloutmetrics.Sources{
		Deployments: factory.Apps().V1().Deployments(),
		ReplicaSets: factory.Apps().V1().ReplicaSets(),
		Pods:        factory.Core().V1().Pods(),
	}, nil, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rollout metrics: %w", err)
	}
	return feeder, rolloutmetrics.Use(tracker, klog.FromContext(ctx)), nil
}
