package manager

import (
	"sync"
	"time"

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

// registerMetrics registers the metrics a manager's process serves in the
// legacy registry, once per process: syncDuration, unsupportedFields and
// serverVersionSkew (the manager's own), the rollout metrics and
// kubedeploy_deployment_unavailable_pods (rolloutmetrics); the controller
// packages register theirs when built. Controllers get syncObserver through
// their Config.
func registerMetrics() {
	rolloutmetrics.Register()
	rolloutmetrics.RegisterUnavailablePods()
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncDuration)
		legacyregistry.CustomMustRegister(unsupportedFields)
		legacyregistry.MustRegister(serverVersionSkew)
	})
}
