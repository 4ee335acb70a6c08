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

	// consistencyWaitExpired counts read-your-writes waits that hit their cap
	// and were abandoned (IM-4).
	consistencyWaitExpired = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "kubedeploy_consistency_wait_expired_total",
		Help:           "Number of times a controller stopped waiting for its informer caches to observe its own writes, by controller.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	registerOnce sync.Once
)

// registerMetrics registers this package's metrics in the legacy registry
// once per process; the constructors call it.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(expectationsExpired, consistencyWaitExpired)
	})
}
