package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultMaxConsistencyWait caps how long a key waits for the informer caches
// to observe the controller's own writes before the guard gives up, logs,
// counts and lets the sync proceed (IM-4).
const DefaultMaxConsistencyWait = time.Minute

// ObservedFunc returns the newest resourceVersion an informer cache has
// observed, or "" when unknown.
type ObservedFunc func() string

// InformerObserved returns an ObservedFunc for informer: the resourceVersion of
// the last change applied to its store (what listers see; available with the
// client-go AtomicFIFO feature, beta and on by default in 1.36), falling back
// to the reflector's last synced resourceVersion when the store does not
// report one.
func InformerObserved(informer cache.SharedIndexInformer) ObservedFunc {
	return func() string {
		if rv := informer.GetIndexer().LastStoreSyncResourceVersion(); rv != "" {
			return rv
		}
		return informer.LastSyncResourceVersion()
	}
}

// ConsistencyTracker is the read-your-writes guard of IM-4 (RS-1, KEP-5647):
// per controller key it remembers, per resource ("pods", "replicasets"), the
// highest resourceVersion returned by the controller's own writes, and
// CaughtUp reports whether the informer for each such resource has observed
// it. It is conservative and can never wedge a key: unknown or non-integer
// resourceVersions count as caught up, a record is cleared once caught up or
// by Forget, and a wait longer than MaxWait is abandoned (logged, counted in
// kubedeploy_consistency_wait_expired_total and reported to OnGiveUp).
// Safe for concurrent use; build it with NewConsistencyTracker.
type ConsistencyTracker struct {
	// Controller names the owning controller in logs and metrics.
	Controller string
	// Clock dates records. Tests inject a fake.
	Clock clock.PassiveClock
	// MaxWait is the longest a key waits (DefaultMaxConsistencyWait, 1 minute).
	MaxWait time.Duration
	// OnGiveUp, if set, is called (without locks held) with the key whenever a
	// wait is abandoned after MaxWait. A test seam.
	OnGiveUp func(key string)

	sources map[string]ObservedFunc

	mu      sync.Mutex
	records map[string]*writeRecord
}

// writeRecord is what one key waits for.
type writeRecord struct {
	// rvs maps resource to the newest resourceVersion written.
	rvs map[string]string
	// since is when the first not-yet-observed write was recorded.
	since time.Time
}

// NewConsistencyTracker returns a tracker for controller. sources maps each
// resource name used with RecordWrite to the function reporting what its
// informer has observed (see InformerObserved). clk nil means the real clock.
func NewConsistencyTracker(controller string, clk clock.PassiveClock, sources map[string]ObservedFunc) *ConsistencyTracker {
	registerMetrics()
	if clk == nil {
		clk = clock.RealClock{}
	}
	src := make(map[string]ObservedFunc, len(sources))
	for k, v := range sources {
		src[k] = v
	}
	return &ConsistencyTracker{
		Controller: controller, Clock: clk, MaxWait: DefaultMaxConsistencyWait,
		sources: src, records: map[string]*writeRecord{},
	}
}

// RecordWrite remembers that a write made while syncing key returned
// resourceVersion rv for an object of resource. An empty rv is ignored.
func (t *ConsistencyTracker) RecordWrite(key, resource, rv string) {
	if rv == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.records[key]
	if !ok {
		r = &writeRecord{rvs: map[string]string{}, since: t.Clock.Now()}
		t.records[key] = r
	}
	if old, ok := r.rvs[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(rv, old); err == nil && cmp < 0 {
			return
		}
	}
	r.rvs[resource] = rv
}

// CaughtUp reports whether every informer has observed the newest write
// recorded for key (IM-4). It clears the record when they have, and also when
// the wait has lasted longer than MaxWait (logging and counting that), so it
// returns false only while a bounded wait is in progress.
func (t *ConsistencyTracker) CaughtUp(logger klog.Logger, key string) bool {
	t.mu.Lock()
	r, ok := t.records[key]
	if !ok {
		t.mu.Unlock()
		return true
	}
	var behind []any
	for resource, written := range r.rvs {
		if observed := t.observed(resource); !caughtUp(observed, written) {
			behind = append(behind, resource+"Written", written, resource+"Observed", observed)
		}
	}
	waited := t.Clock.Since(r.since)
	if len(behind) > 0 && waited <= t.MaxWait {
		t.mu.Unlock()
		logger.V(4).Info("Informer caches have not observed our last writes yet", append([]any{"controller", t.Controller, "key", key}, behind...)...)
		return false
	}
	delete(t.records, key)
	t.mu.Unlock()
	if len(behind) > 0 {
		logger.Info("Gave up waiting for informer caches to observe our last writes",
			append([]any{"controller", t.Controller, "key", key, "waited", waited}, behind...)...)
		consistencyWaitExpired.WithLabelValues(t.Controller).Inc()
		if t.OnGiveUp != nil {
			t.OnGiveUp(key)
		}
	}
	return true
}

func (t *ConsistencyTracker) observed(resource string) string {
	if f := t.sources[resource]; f != nil {
		return f()
	}
	return ""
}

// caughtUp compares resourceVersions with the apimachinery helper; anything it
// cannot compare (empty, not an integer) counts as caught up.
func caughtUp(observed, written string) bool {
	cmp, err := resourceversion.CompareResourceVersion(observed, written)
	if err != nil {
		return true
	}
	return cmp >= 0
}

// Forget drops key's record (the controller object was deleted or not found).
func (t *ConsistencyTracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.records, key)
}

// Waiting reports whether key has a record. For tests.
func (t *ConsistencyTracker) Waiting(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.records[key]
	return ok
}
