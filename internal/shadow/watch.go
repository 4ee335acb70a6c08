package shadow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// DefaultQuiet is how long a Deployment's divergent state must stay unchanged (the same resourceVersions of
// it and its ReplicaSets) before its divergences are reported: the live controller acts on a change in
// milliseconds, so a state it leaves alone for this long is its fixed point, not a step it is about to leave
// (for example the old ReplicaSets a completed rollout's next sync deletes past revisionHistoryLimit).
const DefaultQuiet = 5 * time.Second

// checkDelay coalesces the checks a burst of changes to one Deployment (its pods') causes: at most one per
// Deployment per checkDelay.
const checkDelay = time.Second

// Watcher runs a Checker on each Deployment whenever it or its ReplicaSets change, or one of its pods is gone, and reports each
// divergence once it is confirmed (the same state DefaultQuiet later) and once only, until the Deployment
// converges or changes; it also checks every ReplicaSet write against its Deployment's rolling-update bounds
// (CheckBounds). It writes nothing.
type Watcher struct {
	checker  *Checker
	clock    clock.Clock
	quiet    time.Duration
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	synced   []cache.InformerSynced

	// OnDivergence is told each confirmed divergence once; OnViolation each bound violation. Set them before
	// Run.
	OnDivergence func(key cache.ObjectName, d Divergence)
	OnViolation  func(key cache.ObjectName, v Violation)
	// OnCheck is told every check's report.
	OnCheck func(r Report)
	// OnError is told a check that failed (it is retried with backoff).
	OnError func(key cache.ObjectName, err error)

	mu       sync.Mutex
	pending  map[cache.ObjectName]pendingState
	reported map[cache.ObjectName]map[where]bool
}

// pendingState is a divergent state seen once, waiting for confirmation.
type pendingState struct {
	fingerprint string
	since       time.Time
}

// NewWatcher builds a Watcher over src (the informers a Checker is built from, with checker) and adds its
// handlers: call it before the informers start. quiet <= 0 is DefaultQuiet; a nil clk is the real clock. It
// returns the informers' error when a handler cannot be added.
func NewWatcher(checker *Checker, src Sources, clk clock.WithTicker, quiet time.Duration) (*Watcher, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	w := &Watcher{
		checker: checker, clock: clk, quiet: quiet,
		dLister: src.Deployments.Lister(), rsLister: src.ReplicaSets.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "shadow", Clock: clk}),
		synced:   []cache.InformerSynced{src.Deployments.Informer().HasSynced, src.ReplicaSets.Informer().HasSynced, src.Pods.Informer().HasSynced},
		pending:  map[cache.ObjectName]pendingState{},
		reported: map[cache.ObjectName]map[where]bool{},
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{src.Deployments.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: w.deploymentChanged, UpdateFunc: func(_, cur any) { w.deploymentChanged(cur) }, DeleteFunc: w.deploymentDeleted}},
		{src.ReplicaSets.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: w.ownedChanged, UpdateFunc: w.replicaSetUpdated, DeleteFunc: w.ownedChanged}},
		// A pod's creation or update changes whether its Deployment is settled only through its ReplicaSet's
		// status, which the ReplicaSet controller then writes (an event here); a terminating pod's removal may
		// change nothing else.
		{src.Pods.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: w.ownedChanged}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("shadow: %w", err)
		}
	}
	return w, nil
}

func (w *Watcher) deploymentChanged(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		w.queue.AddAfter(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}, checkDelay)
	}
}

func (w *Watcher) deploymentDeleted(obj any) {
	if d, ok := runner.ObjectFrom[metav1.Object](logr.Discard(), obj); ok {
		key := cache.ObjectName{Namespace: d.GetNamespace(), Name: d.GetName()}
		w.mu.Lock()
		delete(w.pending, key)
		delete(w.reported, key)
		w.mu.Unlock()
	}
}

// ownedChanged queues the Deployment of a ReplicaSet, or of a pod's ReplicaSet.
func (w *Watcher) ownedChanged(obj any) {
	m, ok := runner.ObjectFrom[metav1.Object](logr.Discard(), obj)
	if !ok {
		return
	}
	name, ok := rolloutstate.DeploymentOf(m)
	if _, isPod := m.(*v1.Pod); isPod {
		_, name, ok = rolloutstate.DeploymentOfPod(m, w.rsLister.ReplicaSets(m.GetNamespace()).Get)
	}
	if ok {
		w.queue.AddAfter(cache.ObjectName{Namespace: m.GetNamespace(), Name: name}, checkDelay)
	}
}

// replicaSetUpdated checks the write against its Deployment's bounds, then queues the Deployment.
func (w *Watcher) replicaSetUpdated(oldObj, curObj any) {
	w.ownedChanged(curObj)
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := curObj.(*appsv1.ReplicaSet)
	ref := metav1.GetControllerOfNoCopy(cur)
	if !ok1 || !ok2 || ref == nil || ref.Kind != "Deployment" || w.OnViolation == nil {
		return
	}
	d, ok := ownership.Resolve(ref, "Deployment", w.dLister.Deployments(cur.Namespace).Get)
	if !ok {
		return
	}
	rss, err := ownership.ByController[*appsv1.ReplicaSet](w.checker.rsIndexer, d.UID)
	if err != nil {
		return
	}
	for _, v := range CheckBounds(d, old, cur, rss) {
		w.OnViolation(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}, v)
	}
}

// Run waits for the caches, then checks queued Deployments one at a time until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	defer w.queue.ShutDown()
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return
	}
	for w.processNext(ctx) {
	}
}

func (w *Watcher) processNext(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(key)
	if err := w.check(ctx, key); err != nil {
		if w.OnError != nil {
			w.OnError(key, err)
		}
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// check checks key and reports what is confirmed.
func (w *Watcher) check(ctx context.Context, key cache.ObjectName) error {
	r, err := w.checker.Check(ctx, key)
	if err != nil {
		return err
	}
	if w.OnCheck != nil && r.Fingerprint != "" {
		w.OnCheck(r)
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !r.Settled || len(r.Divergences) == 0 {
		delete(w.pending, key)
		if r.Settled {
			delete(w.reported, key) // converged: a later divergence is news again
		}
		return nil
	}
	p, ok := w.pending[key]
	if !ok || p.fingerprint != r.Fingerprint {
		w.pending[key] = pendingState{fingerprint: r.Fingerprint, since: now}
		w.queue.AddAfter(key, w.quiet)
		return nil
	}
	if now.Sub(p.since) < w.quiet {
		w.queue.AddAfter(key, w.quiet-now.Sub(p.since))
		return nil
	}
	seen := w.reported[key]
	if seen == nil {
		seen = map[where]bool{}
		w.reported[key] = seen
	}
	for _, d := range r.Divergences {
		if seen[d.where()] {
			continue
		}
		seen[d.where()] = true
		if w.OnDivergence != nil {
			w.OnDivergence(key, d)
		}
	}
	return nil
}
