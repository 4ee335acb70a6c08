package shard

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	metricOwnedBuckets = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_owned_buckets", StabilityLevel: metrics.ALPHA,
		Help: "Buckets of the namespace hash space the ring gives this replica (sharded mode, SH-1).",
	})
	metricRunningBuckets = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_running_buckets", StabilityLevel: metrics.ALPHA,
		Help: "Buckets this replica runs controllers for now (a claim won and valid, SH-2).",
	})
	metricRingPods = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_owned_pods", StabilityLevel: metrics.ALPHA,
		Help: "Pods in the namespaces of this replica's buckets, as the ring last measured them (pods).",
	})
	metricCachedPods = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_cached_pods", StabilityLevel: metrics.ALPHA,
		Help: "Pods in the informer caches of the buckets this replica runs (pods; SH-4: only its namespaces'), counted every 10 s.",
	})
	metricCachedNamespaces = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_cached_namespaces", StabilityLevel: metrics.ALPHA,
		Help: "Namespaces with pods in the informer caches of the buckets this replica runs, counted every 10 s.",
	})
	metricHandovers = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_shard_handovers_total", StabilityLevel: metrics.ALPHA,
		Help: "Buckets this replica took (unowned or from an expired replica), accepted (handed to it or claimed again), or released to another replica.",
	}, []string{"direction"})
	metricMoves = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "kubedeploy_shard_moves_total", StabilityLevel: metrics.ALPHA,
		Help: "Buckets this replica's ring writes gave a new owner, by cause (SH-8): initial (a new ring's), joined (to a replica that joined less than 5 minutes ago), left (its owner left or its Lease expired), rebalance (to spread steady pods, at most one every 5 minutes), resplit (new bounds).",
	}, []string{"cause"})
	metricUnownedSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Name: "kubedeploy_shard_unowned_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Seconds a bucket this replica took or accepted had gone unowned: since its release, or since its expired owner's Lease last changed.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120},
	})
	// MetricControllerSets is the number of sets of controllers the replica runs (its runner sets it): 1 while
	// it runs, whatever its buckets, 0 before and after (SH-9: one long-lived set per replica, each bucket with
	// informers of its own).
	MetricControllerSets = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_controller_sets", StabilityLevel: metrics.ALPHA,
		Help: "Sets of controllers this replica runs: 1 while it runs, whatever its buckets (one queue, worker pool and client per controller for the replica's life; each bucket has informers of its own, started when it is taken and stopped when it leaves, SH-9).",
	})
	// MetricServerSideFiltering is 1 when the API server filters this replica's lists and watches by shard
	// (ShardedListAndWatch), 0 when only the client does (SH-4).
	MetricServerSideFiltering = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "kubedeploy_shard_server_side_filtering", StabilityLevel: metrics.ALPHA,
		Help: "1 when the API server filters this replica's lists and watches by shard (ShardedListAndWatch), 0 when only the client does (SH-4).",
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the sharded mode's metrics in the legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricOwnedBuckets, metricRunningBuckets, metricRingPods, metricCachedPods, metricCachedNamespaces, metricHandovers, metricMoves, metricUnownedSeconds, MetricServerSideFiltering, MetricControllerSets)
	})
}
