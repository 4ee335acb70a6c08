package expectations

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultMaxCacheWait is how long a key waits for the informer caches to
// show the controller's own writes before its syncs read from the API server
// instead (IM-4).
const DefaultMaxCacheWait = time.Minute

// Freshness is what ReadYourWrites.Check says about the informer caches for
// one controller key (IM-4).
type Freshness int

const (
	// Fresh: the caches show every write the controller made for the key;
	// the sync may act on them.
	Fresh Freshness = iota
	// Behind: they do not yet, and the key has waited at most MaxWait. The
	// sync must neither create nor delete; it returns and is retried.
	Behind
	// Stale: they still do not after MaxWait. The sync must read the key's
	// objects from the API server (a quorum read) and act on that, never on
	// the caches.
	Stale
)

// String returns "Fresh", "Behind" or "Stale".
func (f Freshness) String() string {
	switch f {
	case Fresh:
		return "Fresh"
	case Behind:
		return "Behind"
	case Stale:
		return "Stale"
	}
	return "Freshness(?)"
}

// Cache is what ReadYourWrites reads of one informer.
type Cache struct {
	// Observed returns the resourceVersion of the newest change applied to
	// the store, or "" when unknown.
	Observed func() string
	// Get returns the stored object with key "namespace/name".
	Get func(key string) (metav1.Object, bool)
	// ObservedIn, if set, is Observed for the objects of one namespace, and is used instead of Observed: for
	// caches kept apart per group of namespaces, whose stores apply changes each at its own pace (sharded
	// mode's per-bucket informers behind one union informer, SH-9), a key's writes are compared with its own
	// namespace's store.
	ObservedIn func(namespace string) string
}

// NamespacedVersions is implemented by an informer's indexer whose objects are kept in several stores by
// namespace (informerunion.Informer's): LastStoreSyncResourceVersionIn is LastStoreSyncResourceVersion of the
// store that holds namespace's objects ("" for none).
type NamespacedVersions interface {
	LastStoreSyncResourceVersionIn(namespace string) string
}

// InformerCache returns the Cache of informer. Observed is the resourceVersion
// of the last change applied to its store (what listers see; client-go's
// AtomicFIFO feature, beta and on by default in 1.36), falling back to the
// reflector's last synced resourceVersion when the store reports none.
//
// An informer whose indexer implements NamespacedVersions is read per namespace (Cache.ObservedIn).
func InformerCache(informer cache.SharedIndexInformer) Cache {
	var observedIn func(string) string
	if nv, ok := informer.GetIndexer().(NamespacedVersions); ok {
		observedIn = nv.LastStoreSyncResourceVersionIn
	}
	return Cache{
		ObservedIn: observedIn,
		Observed: func() string {
			if rv := informer.GetIndexer().LastStoreSyncResourceVersion(); rv != "" {
				return rv
			}
			return informer.LastSyncResourceVersion()
		},
		Get: func(key string) (metav1.Object, bool) {
			obj, ok, err := informer.GetIndexer().GetByKey(key)
			if err != nil || !ok {
				return nil, false
			}
			m, ok := obj.(metav1.Object)
			return m, ok
		},
	}
}

// ReadYourWrites is the one read-your-writes guard of both controllers
// (IM-4; RS-1 and KEP-5647 for the ReplicaSet controller). Per controller
// key it remembers the controller's own writes that the informer caches may
// not show yet:
//
//   - creates, updates and patches by the resourceVersion the API server
//     returned, per resource: the cache shows them once its store has
//     applied a change at least that new;
//   - deletes by object key and UID: the cache shows them once it no longer
//     holds that object or holds it with a deletionTimestamp.
//
// Check tells a sync whether it may act on the caches (Fresh), must wait
// (Behind), or must read from the API server (Stale, after MaxWait). A record
// is dropped only when the caches show every write in it, or by Forget: the
// expectations TTL never lets a sync act on a cache older than its own
// writes. Waits and reads from the API server are counted in
// kubedeploy_cache_behind_waits_total and
// kubedeploy_cache_behind_live_reads_total. Build it with NewReadYourWrites;
// safe for concurrent use.
type ReadYourWrites struct {
	// Controller names the owning controller in logs and metrics.
	Controller string
	// Clock dates records. Tests inject a fake.
	Clock clock.PassiveClock
	// MaxWait is how long a key is Behind before it is Stale
	// (DefaultMaxCacheWait, 1 minute).
	MaxWait time.Duration

	caches map[string]Cache

	mu      sync.Mutex
	records map[string]*pendingWrites
}

// pendingWrites is what one key's syncs wait for.
type pendingWrites struct {
	// written maps resource to the newest resourceVersion written.
	written map[string]string
	// deleted maps resource to object key to the UID we deleted.
	deleted map[string]map[string]types.UID
	// since is when the oldest write not yet shown by the caches was made.
	since time.Time
	// staleLogged makes the first Stale verdict of a record log at Info.
	staleLogged bool
}

// NewReadYourWrites returns a guard for controller. caches maps each
// resource name used with Written and Deleted ("pods", "replicasets",
// "deployments") to its informer (see InformerCache); writes to a resource
// without a Cache never block. clk nil means the real clock; maxWait 0 means
// DefaultMaxCacheWait (1 minute).
func NewReadYourWrites(controller string, clk clock.PassiveClock, maxWait time.Duration, caches map[string]Cache) *ReadYourWrites {
	registerMetrics()
	cacheBehindWaits.WithLabelValues(controller)
	cacheBehindLiveReads.WithLabelValues(controller)
	if clk == nil {
		clk = clock.RealClock{}
	}
	if maxWait == 0 {
		maxWait = DefaultMaxCacheWait
	}
	c := make(map[string]Cache, len(caches))
	for k, v := range caches {
		c[k] = v
	}
	return &ReadYourWrites{
		Controller: controller, Clock: clk, MaxWait: maxWait,
		caches: c, records: map[string]*pendingWrites{},
	}
}

// record returns key's record, creating it. Callers hold mu.
func (g *ReadYourWrites) record(key string) *pendingWrites {
	r, ok := g.records[key]
	if !ok {
		r = &pendingWrites{written: map[string]string{}, deleted: map[string]map[string]types.UID{}, since: g.Clock.Now()}
		g.records[key] = r
	}
	return r
}

// Written remembers obj, as returned by a create, update or patch of
// resource made while syncing key. An object without a resourceVersion (as
// fake clientsets return) is ignored.
func (g *ReadYourWrites) Written(key, resource string, obj metav1.Object) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.record(key)
	if old, ok := r.written[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(rv, old); err == nil && cmp < 0 {
			return
		}
	}
	r.written[resource] = rv
}

// Deleted remembers that a delete of obj (of resource) made while syncing
// key succeeded: until the cache drops obj or shows its deletionTimestamp,
// the cache is behind.
func (g *ReadYourWrites) Deleted(key, resource string, obj metav1.Object) {
	objKey := cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.record(key)
	if r.deleted[resource] == nil {
		r.deleted[resource] = map[string]types.UID{}
	}
	r.deleted[resource][objKey] = obj.GetUID()
}

// Check reports whether a sync of key may act on the informer caches
// (IM-4): Fresh when they show every remembered write (the record is then
// dropped), Behind while they do not and the oldest unshown write is at most
// MaxWait old, Stale after that. Behind and Stale are counted in metrics;
// the first Stale verdict of a record is logged at Info.
func (g *ReadYourWrites) Check(logger klog.Logger, key string) Freshness {
	g.mu.Lock()
	r, ok := g.records[key]
	if !ok {
		g.mu.Unlock()
		return Fresh
	}
	behind := g.unobserved(key, r)
	if len(behind) == 0 {
		delete(g.records, key)
		g.mu.Unlock()
		return Fresh
	}
	waited := g.Clock.Since(r.since)
	if waited <= g.MaxWait {
		g.mu.Unlock()
		cacheBehindWaits.WithLabelValues(g.Controller).Inc()
		logger.V(4).Info("Informer caches do not show our last writes yet; waiting",
			append([]any{"controller", g.Controller, "key", key, "waited", waited}, behind...)...)
		return Behind
	}
	first := !r.staleLogged
	r.staleLogged = true
	g.mu.Unlock()
	cacheBehindLiveReads.WithLabelValues(g.Controller).Inc()
	kv := append([]any{"controller", g.Controller, "key", key, "waited", waited}, behind...)
	if first {
		logger.Info("Informer caches still do not show our last writes; reading from the API server instead", kv...)
	} else {
		logger.V(4).Info("Informer caches still behind; reading from the API server", kv...)
	}
	return Stale
}

// unobserved drops from r, key's record, what the caches show and returns
// log key/values describing the rest. Callers hold mu.
func (g *ReadYourWrites) unobserved(key string, r *pendingWrites) []any {
	var behind []any
	for resource, rv := range r.written {
		c, ok := g.caches[resource]
		if !ok {
			delete(r.written, resource)
			continue
		}
		observed := c.observed(key)
		if caughtUp(observed, rv) {
			delete(r.written, resource)
			continue
		}
		behind = append(behind, resource+"Written", rv, resource+"Observed", observed)
	}
	for resource, objs := range r.deleted {
		c, ok := g.caches[resource]
		for objKey, uid := range objs {
			if !ok || deletionShown(c, objKey, uid) {
				delete(objs, objKey)
				continue
			}
			behind = append(behind, resource+"Deleted", objKey)
		}
		if len(objs) == 0 {
			delete(r.deleted, resource)
		}
	}
	return behind
}

// observed is what c has applied, for the objects of key's namespace when c
// keeps them apart (ObservedIn).
func (c Cache) observed(key string) string {
	if c.ObservedIn != nil {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		return c.ObservedIn(ns)
	}
	return c.Observed()
}

// deletionShown reports whether c no longer holds the object objKey with
// uid, or holds it with a deletionTimestamp.
func deletionShown(c Cache, objKey string, uid types.UID) bool {
	obj, ok := c.Get(objKey)
	return !ok || obj.GetUID() != uid || obj.GetDeletionTimestamp() != nil
}

// caughtUp compares resourceVersions with the apimachinery helper; anything
// it cannot compare (empty, not an integer) counts as caught up, so an
// unusual API server can never wedge a key.
func caughtUp(observed, written string) bool {
	cmp, err := resourceversion.CompareResourceVersion(observed, written)
	if err != nil {
		return true
	}
	return cmp >= 0
}

// NextCheck returns when a sync that saw freshness should run again without
// an event: after, the sync's own wish (0 for none), except that after a
// Stale sync it is at most MaxWait, since the lagging caches may not bring
// the events that would (IM-4).
func (g *ReadYourWrites) NextCheck(freshness Freshness, after time.Duration) time.Duration {
	if freshness != Stale || (after > 0 && after <= g.MaxWait) {
		return after
	}
	return g.MaxWait
}

// Forget drops key's record (the controller object was deleted or not found).
func (g *ReadYourWrites) Forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.records, key)
}

// ForgetNamespaces drops the records of every key whose namespace in
// reports, and returns how many (sharded mode, SH-3: a bucket's keys start
// from nothing each time it is taken).
func (g *ReadYourWrites) ForgetNamespaces(in func(namespace string) bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return forgetNamespaces(g.records, in)
}

// Pending reports whether key has writes the caches were not yet seen to
// show. For tests.
func (g *ReadYourWrites) Pending(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.records[key]
	return ok
}
