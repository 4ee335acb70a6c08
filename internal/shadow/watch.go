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
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
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
// converges or is deleted; it also checks every ReplicaSet write against its Deployment's rolling-update bounds
// (CheckBounds). It writes nothing. Its work loop, retries (with backoff) and shutdown are runner.Runner's,
// as the controllers' are: a check is the runner's sync, and the quiet period a Result.RequeueAfter.
type Watcher struct {
	checker  *Checker
	clock    clock.Clock
	quiet    time.Duration
	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	runner   *runner.Runner
	// check is checker.Check; a test seam.
	check func(ctx context.Context, key cache.ObjectName) (Report, error)

	// OnDivergence is told each confirmed divergence once; OnViolation each bound violation. Set them before
	// Run.
	OnDivergence func(key cache.ObjectName, d Divergence)
	OnViolation  func(key cache.ObjectName, v Violation)
	// OnCheck is told every check's report (of a Deployment in the cache).
	OnCheck func(r Report)
	// OnError is told a check that failed (it is retried with backoff).
	OnError func(key cache.ObjectName, err error)
	// OnState is told what each check of a Deployment in the cache decided (a State), and StateForgotten when
	// the Deployment is deleted.
	OnState func(key cache.ObjectName, s State)

	mu       sync.Mutex
	pending  map[cache.ObjectName]pendingState
	reported map[cache.ObjectName]map[where]bool
}

// State is what the Watcher decided about a Deployment at its last check.
type State string

const (
	// StateUnsettled: the Deployment is not settled (a rollout in progress), so it was not synced.
	StateUnsettled State = "unsettled"
	// StateConverged: settled, and kubedeploy would write nothing.
	StateConverged State = "converged"
	// StateUnconfirmed: settled with divergences, waiting for the state to stay unchanged for the quiet period.
	StateUnconfirmed State = "unconfirmed"
	// StateDivergent: settled with divergences that stayed unchanged for the quiet period (reported).
	StateDivergent State = "divergent"
	// StateForgotten: the Deployment was deleted; what was seen and reported of it is forgotten.
	StateForgotten State = "forgotten"
)

// States are the States a check decides, in a fixed order (for metrics).
var States = []State{StateUnsettled, StateConverged, StateUnconfirmed, StateDivergent}

// pendingState is a divergent state seen once, waiting for confirmation.
type pendingState struct {
	fingerprint string
	since       time.Time
}

// watcherName names the Watcher's queue (its workqueue metrics) and its log lines.
const watcherName = "shadow"

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
		checker: checker, clock: clk, quiet: quiet, check: checker.Check,
		dLister: src.Deployments.Lister(), rsLister: src.ReplicaSets.Lister(),
		pending:  map[cache.ObjectName]pendingState{},
		reported: map[cache.ObjectName]map[where]bool{},
	}
	w.runner = runner.New(watcherName, w.sync, runner.WithClock(clk))
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
		if err := w.runner.Handle(h.inf, h.h); err != nil {
			return nil, fmt.Errorf("shadow: %w", err)
		}
	}
	return w, nil
}

func (w *Watcher) deploymentChanged(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		w.runner.EnqueueAfter(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}, checkDelay)
	}
}

func (w *Watcher) deploymentDeleted(obj any) {
	if d, ok := runner.ObjectFrom[metav1.Object](logr.Discard(), obj); ok {
		key := cache.ObjectName{Namespace: d.GetNamespace(), Name: d.GetName()}
		w.mu.Lock()
		delete(w.pending, key)
		delete(w.reported, key)
		if w.OnState != nil {
			w.OnState(key, StateForgotten)
		}
		w.mu.Unlock()
	}
}

// ownedChanged queues the Deployment of a ReplicaSet, or of a pod's ReplicaSet.
func (w *Watcher) ownedChanged(obj any) {
	m, ok := runner.ObjectFrom[metav1.Object](logr.Discard(), obj)
	if !ok {
		return
	}
	name, ok := ownership.DeploymentOf(m)
	if _, isPod := m.(*v1.Pod); isPod {
		_, name, ok = ownership.DeploymentOfPod(m, w.rsLister.ReplicaSets(m.GetNamespace()).Get)
	}
	if ok {
		w.runner.EnqueueAfter(cache.ObjectName{Namespace: m.GetNamespace(), Name: name}, checkDelay)
	}
}

// replicaSetUpdated checks the write against its Deployment's bounds, then queues the Deployment.
func (w *Watcher) replicaSetUpdated(oldObj, curObj any) {
	w.ownedChanged(curObj)
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := curObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || w.OnViolation == nil {
		return
	}
	d, ok := ownership.Resolve(metav1.GetControllerOfNoCopy(cur), ownership.DeploymentKind, w.dLister.Deployments(cur.Namespace).Get)
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

// Run waits for the caches, then checks queued Deployments one at a time until ctx ends (runner.Runner.Run:
// a failed check is retried with backoff, a panic recovered as a failure).
func (w *Watcher) Run(ctx context.Context) {
	w.runner.Run(klog.NewContext(ctx, klog.FromContext(ctx).WithName(watcherName)), 1)
}

// sync is the runner's sync: it checks key, tells OnError a failure (which the runner retries with backoff)
// and asks for the recheck that confirms a divergent state after the quiet period.
func (w *Watcher) sync(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
	r, err := w.check(ctx, key)
	if err != nil {
		if w.OnError != nil {
			w.OnError(key, err)
		}
		return runner.Result{}, err
	}
	if w.OnCheck != nil && r.Fingerprint != "" {
		w.OnCheck(r)
	}
	recheck, confirmed := w.decide(key, r)
	for _, d := range confirmed {
		if w.OnDivergence != nil {
			w.OnDivergence(key, d)
		}
	}
	return runner.Result{RequeueAfter: recheck}, nil
}

// decide records report r of key, tells OnState what it decides and returns when to check key again (0: not
// until it changes) and the divergences confirmed now that were not reported before. A Deployment no longer in
// the cache is left to deploymentDeleted: the lock orders its StateForgotten after any State of key.
func (w *Watcher) decide(key cache.ObjectName, r Report) (time.Duration, []Divergence) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.dLister.Deployments(key.Namespace).Get(key.Name); err != nil {
		delete(w.pending, key)
		return 0, nil
	}
	state, recheck, news := w.decideLocked(key, r, w.clock.Now())
	if w.OnState != nil {
		w.OnState(key, state)
	}
	return recheck, news
}

// decideLocked is decide's decision at now, with w.mu held: the State, when to check again and the
// divergences to report.
func (w *Watcher) decideLocked(key cache.ObjectName, r Report, now time.Time) (State, time.Duration, []Divergence) {
	if !r.Settled || len(r.Divergences) == 0 {
		delete(w.pending, key)
		if !r.Settled {
			return StateUnsettled, 0, nil
		}
		delete(w.reported, key) // converged: a later divergence is news again
		return StateConverged, 0, nil
	}
	p, ok := w.pending[key]
	if !ok || p.fingerprint != r.Fingerprint {
		w.pending[key] = pendingState{fingerprint: r.Fingerprint, since: now}
		return StateUnconfirmed, w.quiet, nil
	}
	if waited := now.Sub(p.since); waited < w.quiet {
		return StateUnconfirmed, w.quiet - waited, nil
	}
	seen := w.reported[key]
	if seen == nil {
		seen = map[where]bool{}
		w.reported[key] = seen
	}
	var news []Divergence
	for _, d := range r.Divergences {
		if !seen[d.where()] {
			seen[d.where()] = true
			news = append(news, d)
		}
	}
	return StateDivergent, 0, news
}
