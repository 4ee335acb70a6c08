package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultTimeout is how long an unsatisfied expectation record blocks a
// controller before it is considered expired (ExpectationsTimeout, RS-8).
const DefaultTimeout = 5 * time.Minute

// Tracker holds create/delete expectations per controller key ("ns/name"),
// with the expected deletions tracked by pod key ("ns/podName") so that one
// deletion is never observed twice (RS-8..RS-11). The zero value is not
// usable; use NewTracker. Safe for concurrent use.
type Tracker struct {
	// Controller names the owning controller in logs and in the
	// kubedeploy_expectations_expired_total metric ("replicaset").
	Controller string
	// Clock is read when records are set and checked. Tests inject a fake.
	Clock clock.PassiveClock
	// Timeout is the record TTL (DefaultTimeout, 5 minutes; RS-8).
	Timeout time.Duration
	// OnExpired, if set, is called (without locks held) once per record that
	// expires unsatisfied, with the controller key. A test seam; the metric
	// is incremented regardless.
	OnExpired func(key string)

	mu      sync.Mutex
	records map[string]*record
}

// record is the expectation state of one controller key.
type record struct {
	add, del int
	// deleteKeys are the pod keys whose deletion is still expected.
	deleteKeys sets.Set[string]
	// timestamp is when the record was (re)set; lowering never refreshes it.
	timestamp time.Time
	// expiredReported makes expiry logged and counted once per record.
	expiredReported bool
}

// NewTracker returns an empty Tracker for controller using clk (nil means the
// real clock) and timeout as the record TTL (0 means the 5 minute
// DefaultTimeout; RS-8). It registers the package
// metrics in the legacy registry on first use and exports the controller's
// expiry counter at 0, so /metrics shows it before the first expiry.
func NewTracker(controller string, clk clock.PassiveClock, timeout time.Duration) *Tracker {
	registerMetrics()
	expectationsExpired.WithLabelValues(controller)
	if clk == nil {
		clk = clock.RealClock{}
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return &Tracker{Controller: controller, Clock: clk, Timeout: timeout, records: map[string]*record{}}
}

// SatisfiedExpectations reports whether the controller may act on key: true
// when no record exists, when both counters are <= 0, or when the record is
// older than Timeout (RS-8). An expiry is logged and counted once per record.
func (t *Tracker) SatisfiedExpectations(logger klog.Logger, key string) bool {
	t.mu.Lock()
	r, ok := t.records[key]
	if !ok {
		t.mu.Unlock()
		logger.V(4).Info("No expectations recorded; controller is satisfied", "controller", t.Controller, "key", key)
		return true
	}
	if r.add <= 0 && r.del <= 0 {
		t.mu.Unlock()
		logger.V(4).Info("Expectations satisfied", "controller", t.Controller, "key", key)
		return true
	}
	age := t.Clock.Since(r.timestamp)
	if age <= t.Timeout {
		add, del := r.add, r.del
		t.mu.Unlock()
		logger.V(4).Info("Waiting for expectations", "controller", t.Controller, "key", key, "add", add, "del", del)
		return false
	}
	report := !r.expiredReported
	r.expiredReported = true
	add, del := r.add, r.del
	t.mu.Unlock()
	if report {
		logger.Info("Expectations expired unsatisfied",
			"controller", t.Controller, "key", key, "add", add, "del", del, "age", age)
		expectationsExpired.WithLabelValues(t.Controller).Inc()
		if t.OnExpired != nil {
			t.OnExpired(key)
		}
	}
	return true
}

// ExpectCreations replaces key's record with one expecting n pod creations
// (RS-9). Call it before creating.
func (t *Tracker) ExpectCreations(logger klog.Logger, key string, n int) {
	t.set(key, &record{add: n})
	logger.V(4).Info("Expecting creations", "controller", t.Controller, "key", key, "add", n)
}

// ExpectDeletions replaces key's record with one expecting the deletion of
// each pod in podKeys ("ns/podName"); del = number of distinct keys (RS-10).
func (t *Tracker) ExpectDeletions(logger klog.Logger, key string, podKeys []string) {
	keys := sets.New(podKeys...)
	t.set(key, &record{del: keys.Len(), deleteKeys: keys})
	logger.V(4).Info("Expecting deletions", "controller", t.Controller, "key", key, "del", keys.Len())
}

func (t *Tracker) set(key string, r *record) {
	r.timestamp = t.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.records[key] = r
}

// CreationObserved lowers key's expected creations by one (RS-9). It does
// nothing when key has no record.
func (t *Tracker) CreationObserved(logger klog.Logger, key string) {
	t.LowerExpectations(logger, key, 1, 0)
}

// LowerExpectations lowers key's expected creations by add and expected
// deletions by del without refreshing the timestamp (RS-8). Counters may go
// negative. It does nothing when key has no record.
func (t *Tracker) LowerExpectations(logger klog.Logger, key string, add, del int) {
	t.mu.Lock()
	r, ok := t.records[key]
	if ok {
		r.add -= add
		r.del -= del
	}
	t.mu.Unlock()
	if ok {
		logger.V(4).Info("Lowered expectations", "controller", t.Controller, "key", key, "addObserved", add, "delObserved", del)
	}
}

// DeletionObserved lowers key's expected deletions by one if podKey
// ("ns/podName") was among them, and forgets podKey, so repeated observations
// of one pod (update with deletionTimestamp, then delete) count once (RS-10).
func (t *Tracker) DeletionObserved(logger klog.Logger, key, podKey string) {
	t.mu.Lock()
	r, ok := t.records[key]
	found := ok && r.deleteKeys.Has(podKey)
	if found {
		r.deleteKeys.Delete(podKey)
		r.del--
	}
	t.mu.Unlock()
	if found {
		logger.V(4).Info("Observed expected deletion", "controller", t.Controller, "key", key, "pod", podKey)
	}
}

// DeleteExpectations forgets key's record (RS-11: the controller was deleted
// or not found).
func (t *Tracker) DeleteExpectations(logger klog.Logger, key string) {
	t.mu.Lock()
	_, ok := t.records[key]
	delete(t.records, key)
	t.mu.Unlock()
	if ok {
		logger.V(4).Info("Deleted expectations", "controller", t.Controller, "key", key)
	}
}

// ForgetNamespaces forgets the records of every key whose namespace in reports, and returns how many it
// forgot: sharded mode's scope (SH-3, SH-9) calls it for a bucket's namespaces before they are admitted, so that
// expectations left from an earlier time the bucket was owned never hold back or speed up a sync.
func (t *Tracker) ForgetNamespaces(in func(namespace string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return forgetNamespaces(t.records, in)
}

// forgetNamespaces deletes the records of records ("namespace/name" keys) whose namespace in reports, and
// returns how many.
func forgetNamespaces[R any](records map[string]R, in func(namespace string) bool) int {
	n := 0
	for key := range records {
		if ns, _, err := cache.SplitMetaNamespaceKey(key); err == nil && in(ns) {
			delete(records, key)
			n++
		}
	}
	return n
}

// PendingCreations returns the pod creations key's record still expects, in
// pods: the creations issued (or about to be) whose pods the controller has
// not yet observed. It is 0 without a record, for a record older than Timeout
// (its creations have long landed or failed), or when none are outstanding.
// The Deployment controller counts them in a ReplicaSet's footprint (EX-3).
func (t *Tracker) PendingCreations(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.records[key]
	if !ok || r.add <= 0 || t.Clock.Since(r.timestamp) > t.Timeout {
		return 0
	}
	return r.add
}

// Pending returns key's outstanding creations and deletions and whether a
// record exists (expired or not). The ReplicaSet controller's handlers use it
// to tell a sync that can only rewrite status from one that may manage
// replicas.
func (t *Tracker) Pending(key string) (add, del int, exists bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.records[key]
	if !ok {
		return 0, 0, false
	}
	return r.add, r.del, true
}
