package replicaset

import (
	"time"

	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Config is what New needs. Client, ReplicaSets, Pods and Recorder are required.
type Config struct {
	// Client writes pods and ReplicaSet status and does the uncached reads
	// (IM-4, AD-3): apiclient.New over the manager's clientset.
	Client Client
	// ReplicaSets is the shared ReplicaSet informer.
	ReplicaSets appsinformers.ReplicaSetInformer
	// Pods is the shared pod informer; New adds ownership.ControllerIndex to it.
	Pods coreinformers.PodInformer
	// Nodes, if set, is the shared node informer: where each node is, for the
	// scale-downs of ReplicaSets annotated kubedeploy.io/scale-down-spread
	// (EX-4); Run then waits for its cache too. Nil: those scale-downs use
	// RS-14's ranking alone.
	Nodes coreinformers.NodeInformer
	// Recorder records events on ReplicaSets; the manager builds it for the
	// component "replicaset-controller" (CM-8).
	Recorder record.EventRecorder
	// BurstReplicas caps pod creations/deletions per sync (RS-12); 0 means
	// DefaultBurstReplicas (500, CM-4). Negative is invalid.
	BurstReplicas int
	// Clock is the controller's notion of now, also for the work queue's delays
	// (wake-ups, coalescing windows, backoff); nil means the real clock.
	Clock clock.WithTicker
	// ExpectationsTimeout is the expectations TTL (RS-8); 0 means
	// expectations.DefaultTimeout, 5 minutes. Negative is invalid.
	ExpectationsTimeout time.Duration
	// MaxCacheWait is how long a ReplicaSet waits for the informer caches to
	// show this controller's own writes before its syncs read from the API
	// server instead (IM-4); 0 means expectations.DefaultMaxCacheWait, 1
	// minute. Negative is invalid.
	MaxCacheWait time.Duration
	// Observer, if set, is told the duration and error of every sync (metrics).
	Observer runner.Observer
	// Slots, if set, bounds the syncs in flight across every controller sharing it (sharded mode: the
	// replica's share of the fleet's --concurrent-*-syncs, following its buckets; runner.Slots).
	Slots *runner.Slots
	// Scope, if set, is the namespaces the controller acts on now (sharded mode, SH-9: the replica's buckets,
	// admitted and dropped while it runs): keys of other namespaces are dropped, the expectations and
	// read-your-writes records of namespaces about to be admitted are forgotten (SH-3), and every ReplicaSet of
	// namespaces just admitted is enqueued once. Nil: every namespace, always.
	Scope *runner.Scope
	// Templates, if set, is what the informers' transform noted of each ReplicaSet's stored JSON (IM-8): pods of
	// a ReplicaSet whose pod template has fields kubedeploy's API does not know are created from the template as
	// stored, through Client's CreatePodUnstructured. Nil: pods are built from the typed template (tests of
	// typed objects).
	Templates *rawtemplate.Store
	// StatusSyncWindow coalesces the syncs that pod events can only make
	// rewrite status (a pod becoming ready, a creation or deletion observed
	// while more are expected) to at most one per ReplicaSet per window
	// (runner.EnqueueCoalesced); 0 syncs on every event, as upstream.
	// Negative is invalid.
	StatusSyncWindow time.Duration
}

// withDefaults returns c with BurstReplicas 0 set to DefaultBurstReplicas
// and a nil Clock set to the real clock.
func (c Config) withDefaults() Config {
	if c.BurstReplicas == 0 {
		c.BurstReplicas = DefaultBurstReplicas
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}
