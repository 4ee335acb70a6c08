package expectations

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// expectationsExpired counts expectation records that reached their TTL
	// while still unsatisfied (RS-8, IM-4).
	expectationsExpired = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "kubedeploy_expectations_expired_total",
		Help:           "Number of controller expectations that expired unsatisfied after their TTL, by controller.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	// cacheBehindWaits counts syncs deferred because the informer caches did
	// not yet show the controller's own writes for the key (IM-4).
	cacheBehindWaits = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "kubedeploy_cache_behind_waits_total",
		Help:           "Number of syncs deferred because the informer caches did not yet show the controller's own writes for the key, by controller.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	// cacheBehindLiveReads counts syncs that read their objects from the API
	// server because the caches were still behind after the wait cap (IM-4).
	cacheBehindLiveReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "kubedeploy_cache_behind_live_reads_total",
		Help:           "Number of syncs that read their objects from the API server (quorum read) because the informer caches still did not show the controller's own writes after the wait cap, by controller.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	registerOnce sync.Once
)

// registerMetrics registers this package's metrics in the legacy registry
// once per process; the constructors call it.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(expectationsExpired, cacheBehindWaits, cacheBehindLiveReads)
	})
}
