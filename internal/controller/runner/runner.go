package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Result is what a sync asks of the runner besides its error.
type Result struct {
	// RequeueAfter, when > 0 and the sync returned no error, re-adds the key
	// after this duration with AddAfter (not the error backoff; IM-5). Used for
	// progress-deadline checks (ST-16) and minReadySeconds wake-ups (RS-7).
	RequeueAfter time.Duration
}

// ErrWaiting marks a sync error that is an expected wait rather than a
// failure (for example IM-4: the informer cache has not yet observed our own
// last write). Such errors are retried with the same backoff as any other
// (IM-5) but logged only at V(4). Wrap it: fmt.Errorf("...: %w", ErrWaiting).
var ErrWaiting = errors.New("waiting")

// ErrConflict marks a sync error that is an expected optimistic-concurrency
// conflict: a write refused because the object changed since it was read
// (a 409, or a refused conditioned patch). It is retried with the same
// backoff as any error (IM-5) but logged only at V(2). Wrap it.
var ErrConflict = errors.New("conflict")

// ErrCacheBehind is the ErrWaiting a sync returns (and so is retried with
// backoff) while the informer caches do not show the controller's own last
// writes for the key (IM-4, RS-1). Wrap it with the key.
var ErrCacheBehind = fmt.Errorf("informer caches have not observed our last writes yet (%w)", ErrWaiting)

// SyncFunc reconciles one object key. A non-nil error requeues the key with
// the rate limiter (SD-13, RS-19); an error whose cause is a terminating
// namespace is forgotten instead (CM-3).
type SyncFunc func(ctx context.Context, key cache.ObjectName) (Result, error)

// Observer receives one call per finished sync, for metrics. Optional.
type Observer interface {
	// SyncDone reports the controller name, how long the sync took and its error (nil on success).
	SyncDone(controller string, duration time.Duration, err error)
}

// Runner is a named rate-limited queue plus the worker loop that drains it.
type Runner struct {
	name     string
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	sync     SyncFunc
	observer Observer
	// synced are the informers' and handler registrations' HasSynced (WaitFor).
	synced []cache.InformerSynced
	// clock times the queue's delays (AddAfter, coalescing windows, backoff) and the syncs; limiter is the
	// queue's rate limiter. Both are set by options before New builds the queue.
	clock   clock.WithTicker
	limiter workqueue.TypedRateLimiter[cache.ObjectName]
	// slots, when set, bounds the syncs in flight across every runner sharing it.
	slots *Slots
	// scope, when set, is the namespaces whose keys are enqueued and synced (nil: every namespace).
	scope *Scope

	// mu guards lastStart: when each key's last sync began, for EnqueueCoalesced; and waiting: when the
	// delayed add of each key handed to the queue since the key was last taken from it is due (addAfter).
	mu             sync.Mutex
	lastStart      map[cache.ObjectName]time.Time
	pruneAt        int
	waiting        map[cache.ObjectName]time.Time
	waitingPruneAt int
}

// coalesceMemory is how long the start of a key's last sync is remembered for
// EnqueueCoalesced; windows longer than this are not honoured.
const coalesceMemory = time.Minute

// Option configures a Runner.
type Option func(*Runner)

// WithRateLimiter replaces the default rate limiter (tests use a fast one).
func WithRateLimiter(rl workqueue.TypedRateLimiter[cache.ObjectName]) Option {
	return func(r *Runner) { r.limiter = rl }
}

// WithClock makes the queue's delays (EnqueueAfter, EnqueueCoalesced windows, retry backoff) and the sync
// durations given to the Observer follow c instead of the real clock: with a fake clock a test steps time
// instead of sleeping through a window. A nil c keeps the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(r *Runner) {
		if c != nil {
			r.clock = c
		}
	}
}

// Slots bounds how many syncs run at once across the runners that share it: in sharded mode each bucket has
// its own controllers, and the workers of all of a replica's controllers of one kind share the process's
// --concurrent-*-syncs, as one controller's workers would (more syncs in flight than that only queue up behind
// the client's rate limiter, and each decision then lands later). Build it with NewSlots; SetLimit changes the
// bound while runners use it.
type Slots struct {
	mu          sync.Mutex
	limit, used int
	// freed is closed (and replaced) when a slot is released or the limit changes: waiters look again.
	freed chan struct{}
}

// NewSlots returns Slots for n syncs at once (n < 1 is 1).
func NewSlots(n int) *Slots { return &Slots{limit: max(n, 1), freed: make(chan struct{})} }

// SetLimit makes the bound n syncs at once (n < 1 is 1). Lowering it stops no sync in flight: new syncs wait
// until fewer than n run.
func (s *Slots) SetLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = max(n, 1)
	s.wake()
}

// Limit returns the bound (syncs at once).
func (s *Slots) Limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}

// acquire takes a slot, waiting for one; it returns false, holding none, when ctx ends first.
func (s *Slots) acquire(ctx context.Context) bool {
	for {
		s.mu.Lock()
		if s.used < s.limit {
			s.used++
			s.mu.Unlock()
			return true
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// release gives back a slot acquire took.
func (s *Slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	s.wake()
}

// wake tells the waiters to look again. Call with mu held.
func (s *Slots) wake() {
	close(s.freed)
	s.freed = make(chan struct{})
}

// WithSlots makes each sync first take one of s (nil: no bound but the workers).
func WithSlots(s *Slots) Option { return func(r *Runner) { r.slots = s } }

// WithScope makes the runner enqueue and sync only the keys of the namespaces s admits, and track its syncs
// in flight in s (Scope.Drop); a nil s admits every namespace.
func WithScope(s *Scope) Option { return func(r *Runner) { r.scope = s } }

// WithObserver reports each finished sync to o; a nil o reports nothing.
func WithObserver(o Observer) Option { return func(r *Runner) { r.observer = o } }

// WaitFor adds the HasSynced functions (of informers and of handler
// registrations) that Run waits for before starting workers and that
// HasSynced reports on. Call it before Run.
func (r *Runner) WaitFor(synced ...cache.InformerSynced) { r.synced = append(r.synced, synced...) }

// Handle registers h on inf and adds both the informer's and the
// registration's HasSynced to what Run waits for (WaitFor). It returns the
// informer's error (e.g. when it has already stopped).
func (r *Runner) Handle(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("%s controller: adding an event handler: %w", r.name, err)
	}
	r.WaitFor(inf.HasSynced, reg.HasSynced)
	return nil
}

// HasSynced reports whether every function given to WaitFor reports synced.
func (r *Runner) HasSynced() bool {
	for _, s := range r.synced {
		if !s() {
			return false
		}
	}
	return true
}

// New returns a Runner whose queue is named name ("deployment", "replicaset")
// and uses DefaultTypedControllerRateLimiter: per-key exponential backoff from
// 5ms doubling to 1000s, combined with a global 10 qps / burst 100 bucket (CM-2).
func New(name string, sync SyncFunc, opts ...Option) *Runner {
	r := &Runner{name: name, sync: sync, clock: clock.RealClock{},
		limiter:   workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		lastStart: map[cache.ObjectName]time.Time{}, pruneAt: 1024,
		waiting: map[cache.ObjectName]time.Time{}, waitingPruneAt: 1024}
	for _, o := range opts {
		o(r)
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(r.limiter,
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: name, Clock: r.clock})
	return r
}

// Enqueue adds key to the queue (deduplicated while waiting); a key of a namespace outside the runner's Scope
// is dropped.
func (r *Runner) Enqueue(key cache.ObjectName) {
	if r.scope.Admits(key.Namespace) {
		r.queue.Add(key)
	}
}

// EnqueueObject adds obj's namespace/name key to the queue.
func (r *Runner) EnqueueObject(obj metav1.Object) { r.Enqueue(cache.MetaObjectToName(obj)) }

// EnqueueCoalesced adds key so that a storm of events costs one sync per
// window (> 0) instead of one each: at once if the key's last sync began at
// least window ago (or is not remembered), else when that is due (a key
// already waiting keeps its earlier time). Events that can only change what a
// sync writes to status use it (issue 10: one status write per pod change
// was most of the controllers' traffic); window ≤ 0 is Enqueue.
func (r *Runner) EnqueueCoalesced(key cache.ObjectName, window time.Duration) {
	if window <= 0 || !r.scope.Admits(key.Namespace) {
		r.Enqueue(key)
		return
	}
	r.mu.Lock()
	last, ok := r.lastStart[key]
	r.mu.Unlock()
	if wait := window - r.clock.Since(last); ok && wait > 0 {
		r.addAfter(key, wait)
		return
	}
	r.queue.Add(key)
}

// StatusOnlyUpdate reports whether cur differs from old in status alone: the
// same generation (so the same spec), labels, annotations and deletion state.
// Such updates are what EnqueueCoalesced is for.
func StatusOnlyUpdate(old, cur metav1.Object) bool {
	return old.GetGeneration() == cur.GetGeneration() &&
		(old.GetDeletionTimestamp() == nil) == (cur.GetDeletionTimestamp() == nil) &&
		maps.Equal(old.GetLabels(), cur.GetLabels()) && maps.Equal(old.GetAnnotations(), cur.GetAnnotations())
}

// startedSync remembers when key's sync began, forgetting starts older than
// coalesceMemory whenever the map has doubled since it was last pruned.
func (r *Runner) startedSync(key cache.ObjectName, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastStart[key] = at
	if len(r.lastStart) < r.pruneAt {
		return
	}
	for k, t := range r.lastStart {
		if at.Sub(t) > coalesceMemory {
			delete(r.lastStart, k)
		}
	}
	r.pruneAt = max(1024, 2*len(r.lastStart))
}

// EnqueueAfter adds key after d (a time-based wake-up, not a retry); a key of a namespace outside the runner's
// Scope is dropped.
func (r *Runner) EnqueueAfter(key cache.ObjectName, d time.Duration) {
	if r.scope.Admits(key.Namespace) {
		r.addAfter(key, d)
	}
}

// addAfter hands key to the queue's AddAfter(key, d) unless a delayed add of key is already waiting there that is
// due no later than this one: one handed over since the key was last taken from the queue (tookKey), and not due
// yet. The queue keeps only the earliest delayed add of a key, so such a call changes nothing but costs a hand-off
// to the queue's timer goroutine and a wake-up of it; the status-coalescing windows of a rollout asked for about
// eight times as many as the syncs they led to (issue 48: 3,780 delayed adds at 1,000 replicas, upstream 449). An
// earlier one is handed over, as is any after the key was taken (a retry with backoff may have replaced the
// waiting add with an earlier one, which fired). d ≤ 0 adds the key at once.
func (r *Runner) addAfter(key cache.ObjectName, d time.Duration) {
	if d <= 0 {
		r.queue.Add(key)
		return
	}
	now := r.clock.Now()
	due := now.Add(d)
	r.mu.Lock()
	if w, ok := r.waiting[key]; ok && w.After(now) && !w.After(due) {
		r.mu.Unlock()
		return
	}
	r.waiting[key] = due
	if len(r.waiting) >= r.waitingPruneAt {
		for k, w := range r.waiting {
			if !w.After(now) {
				delete(r.waiting, k)
			}
		}
		r.waitingPruneAt = max(1024, 2*len(r.waiting))
	}
	r.mu.Unlock()
	r.queue.AddAfter(key, d)
}

// tookKey forgets the delayed add waiting for key: key has left the queue, so whatever add is still waiting (if
// any) may not be the one addAfter recorded.
func (r *Runner) tookKey(key cache.ObjectName) {
	r.mu.Lock()
	delete(r.waiting, key)
	r.mu.Unlock()
}

// Len returns the number of keys waiting (for tests and metrics).
func (r *Runner) Len() int { return r.queue.Len() }

// NumRequeues returns how many times key has been retried since its last success.
func (r *Runner) NumRequeues(key cache.ObjectName) int { return r.queue.NumRequeues(key) }

// Run waits for the caches given to WaitFor, then starts workers goroutines
// and blocks until ctx is done; it then shuts the queue down and waits for
// in-flight syncs to finish. A worker that returns is restarted after 1s
// (CM-1). If ctx ends before the caches sync, Run returns without syncing.
func (r *Runner) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", r.name)
	defer logger.Info("Shutting down controller", "controller", r.name)
	if !r.waitSynced(ctx, logger) {
		r.queue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	go func() {
		<-ctx.Done()
		r.queue.ShutDownWithDrain()
	}()
	logger.Info("Starting workers", "controller", r.name, "workers", workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, r.worker, time.Second)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	logger.Info("Stopped workers", "controller", r.name)
}

// waitSynced waits for every function given to WaitFor to report synced, polling every 100 ms as client-go's
// WaitForCacheSync does, and reports whether they did before ctx ended. A context ended first is a shutdown (a
// process stopping, a sharded replica's bucket moving before its caches synced), logged at V(2), not an error.
func (r *Runner) waitSynced(ctx context.Context, logger klog.Logger) bool {
	logger.V(2).Info("Waiting for caches to sync", "controller", r.name)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return r.HasSynced(), nil
	})
	if err != nil {
		logger.V(2).Info("Stopped before the caches synced", "controller", r.name)
		return false
	}
	logger.Info("Caches are synced", "controller", r.name)
	return true
}

func (r *Runner) worker(ctx context.Context) {
	for r.ProcessNextItem(ctx) {
	}
}

// ProcessNextItem takes one key, syncs it and applies the retry policy. It
// returns false once the queue is shut down. A key of a namespace the
// runner's Scope no longer admits is dropped (forgotten) instead of synced.
// Exported so fixture tests can drive a controller one key at a time.
func (r *Runner) ProcessNextItem(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	r.tookKey(key)
	defer r.queue.Done(key)
	if !r.scope.Admits(key.Namespace) {
		r.drop(ctx, key)
		return true
	}
	if r.slots != nil {
		if !r.slots.acquire(ctx) {
			return true // shutting down: the queue ends the worker next
		}
		defer r.slots.release()
	}
	syncCtx, f, ok := r.scope.enter(ctx, key.Namespace)
	if !ok { // dropped while it waited for a slot
		r.drop(ctx, key)
		return true
	}
	defer r.scope.exit(f)
	ctx = syncCtx
	start := r.clock.Now()
	r.startedSync(key, start)
	res, err := r.safeSync(ctx, key)
	if r.observer != nil {
		r.observer.SyncDone(r.name, r.clock.Since(start), err)
	}
	r.handleResult(ctx, key, res, err)
	return true
}

// drop forgets key, whose namespace the runner's Scope does not admit (SH-9: its bucket was given up).
func (r *Runner) drop(ctx context.Context, key cache.ObjectName) {
	r.queue.Forget(key)
	klog.FromContext(ctx).V(4).Info("Dropping a key outside this controller's scope", "controller", r.name, "key", key.String())
}

// safeSync runs the sync and turns a panic into an error, so one strange
// object cannot crash the controller (house style: panics are recovered,
// logged and counted).
func (r *Runner) safeSync(ctx context.Context, key cache.ObjectName) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while syncing %s %q: %v", r.name, key.String(), p)
			utilruntime.HandleErrorWithContext(ctx, err, "Recovered from panic", "controller", r.name, "key", key.String())
		}
	}()
	return r.sync(ctx, key)
}

func (r *Runner) handleResult(ctx context.Context, key cache.ObjectName, res Result, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case err == nil:
		r.queue.Forget(key)
		if res.RequeueAfter > 0 {
			r.addAfter(key, res.RequeueAfter)
		}
	case errors.Is(err, ErrWaiting):
		logger.V(4).Info("Sync is waiting; will retry with backoff", "controller", r.name, "key", key.String(), "reason", err)
		r.queue.AddRateLimited(key)
	case errors.Is(err, ErrConflict) || apierrors.IsConflict(err):
		logger.V(2).Info("Sync hit a write conflict; will retry with backoff", "controller", r.name, "key", key.String(), "err", err)
		r.queue.AddRateLimited(key)
	case IsNamespaceTerminating(err):
		logger.V(2).Info("Namespace is terminating; dropping key", "controller", r.name, "key", key.String())
		r.queue.Forget(key)
	default:
		// One retry policy for every controller (IM-5): back off, never drop.
		n := r.queue.NumRequeues(key)
		if n == 0 {
			logger.Info("Sync failed; will retry with backoff", "controller", r.name, "key", key.String(), "err", err)
		} else {
			logger.V(4).Info("Sync failed again", "controller", r.name, "key", key.String(), "retries", n, "err", err)
		}
		r.queue.AddRateLimited(key)
	}
}

// IsStopping reports whether err is the controller's own stop cutting a request short (context.Canceled): a sync
// that fails so is retried by the next owner or the next start, and is no failure to report in an event or a
// condition.
func IsStopping(err error) bool { return errors.Is(err, context.Canceled) }

// IsNamespaceTerminating reports whether err (or an error it wraps) is an API
// error caused by creating in a namespace that is being deleted.
func IsNamespaceTerminating(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause)
}

// ObjectFrom returns obj as a T, unwrapping a cache.DeletedFinalStateUnknown
// tombstone. It returns false (and logs) when obj is neither; handlers then
// ignore the event instead of crashing.
func ObjectFrom[T any](logger klog.Logger, obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	var zero T
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		logger.Info("Ignoring event for an object of unexpected type", "type", reflect.TypeOf(obj))
		return zero, false
	}
	t, ok := tombstone.Obj.(T)
	if !ok {
		logger.Info("Ignoring tombstone holding an object of unexpected type", "type", reflect.TypeOf(tombstone.Obj))
		return zero, false
	}
	return t, true
}

// RequiredFields returns one "<name> is required" error for each entry of
// fields (a controller Config's field names and values) whose value is nil,
// in name order; none when every value is set. Config.Validate of both
// controllers use it.
func RequiredFields(fields map[string]any) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if fields[name] == nil {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	return errs
}

// NonNegative returns an error "NAME must not be negative, got VALUE" for
// each entry of fields (a Config field's name → its value: a duration or a
// count) below 0, in name order; nil when there is none.
func NonNegative[T int | int32 | time.Duration](fields map[string]T) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if fields[name] < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", name, fields[name]))
		}
	}
	return errs
}
