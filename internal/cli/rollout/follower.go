package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/timeline"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// follower keeps `rollout watch`'s copy of one Deployment, the ReplicaSets
// and pods of its selector and its events, with client-go informers (one
// list, then watches: no polling), signals every change on changed, and,
// when recording, keeps a timeline of the Deployment and its ReplicaSets
// with the time each change arrived.
type follower struct {
	ns, name string
	uid      types.UID

	factories []informers.SharedInformerFactory
	dLister   appslisters.DeploymentNamespaceLister
	rsLister  appslisters.ReplicaSetNamespaceLister
	podLister corelisters.PodNamespaceLister
	evLister  corelisters.EventNamespaceLister // nil when no events are shown or recorded

	// changed receives (without blocking the informers) after any change.
	changed chan struct{}

	// synced is set once every informer has its first list: samples are
	// recorded from then on (a half-filled cache would draw a false start).
	synced atomic.Bool
	mu     sync.Mutex
	rec    *timeline.Recording // nil when not recording
	// seen is the count last recorded per event UID: an aggregated event
	// is marked again each time its count goes up.
	seen map[types.UID]int32
	// listed is each event's count in the first list (set once synced).
	listed map[types.UID]int32
	// rolloutStart is when the new ReplicaSet was created: events from
	// before it belong to earlier rollouts and are not drawn.
	rolloutStart time.Time
	events       []recordedEvent
}

// follow starts the informers for d (its name, its selector's ReplicaSets and
// pods in its namespace, its events when events > 0 or record) and waits
// for their first lists. They run until ctx ends; call shutdown after
// cancelling ctx. It returns an error when d's selector is invalid or ctx
// ends before the lists arrive.
func follow(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, events int, record bool) (*follower, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	if sel.Empty() {
		// Validation forbids an empty selector; never watch every pod for one.
		return nil, fmt.Errorf("deployment %s/%s has an empty selector", d.Namespace, d.Name)
	}
	f := &follower{ns: d.Namespace, name: d.Name, uid: d.UID, changed: make(chan struct{}, 1), seen: map[types.UID]int32{}, listed: map[types.UID]int32{}}
	if record {
		f.rec = &timeline.Recording{Namespace: d.Namespace, Deployment: d.Name}
	}
	for _, h := range f.informers(client, d, sel, events > 0 || record) {
		on := func(obj any) {
			if h.onEvent != nil {
				h.onEvent(obj)
			}
			f.signal()
		}
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    on,
			UpdateFunc: func(_, cur any) { on(cur) },
			DeleteFunc: on,
		}); err != nil {
			return nil, err
		}
	}
	if err := f.start(ctx, record); err != nil {
		return nil, err
	}
	return f, nil
}

// informerHandler is one informer of a follower and what it records of an
// object before the change is signalled (nil: nothing).
type informerHandler struct {
	inf     cache.SharedIndexInformer
	onEvent func(obj any)
}

// informers builds the follower's informer factories (the Deployment by
// name; its selector's ReplicaSets and pods; with events, the Deployment's
// events) and listers, and returns the informers with what each records.
func (f *follower) informers(client kubernetes.Interface, d *appsv1.Deployment, sel labels.Selector, events bool) []informerHandler {
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(d.Namespace), informers.WithTweakListOptions(tweak))
		f.factories = append(f.factories, inf)
		return inf
	}
	byName := factory(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", d.Name).String()
	})
	bySelector := factory(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() })
	dInf := byName.Apps().V1().Deployments()
	rsInf := bySelector.Apps().V1().ReplicaSets()
	podInf := bySelector.Core().V1().Pods()
	f.dLister = dInf.Lister().Deployments(d.Namespace)
	f.rsLister = rsInf.Lister().ReplicaSets(d.Namespace)
	f.podLister = podInf.Lister().Pods(d.Namespace)
	handlers := []informerHandler{
		{dInf.Informer(), f.recordState},
		{rsInf.Informer(), f.recordState},
		{podInf.Informer(), nil},
	}
	if events {
		byObject := factory(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.Set{"involvedObject.kind": "Deployment", "involvedObject.name": d.Name}.AsSelector().String()
		})
		evInf := byObject.Core().V1().Events()
		f.evLister = evInf.Lister().Events(d.Namespace)
		handlers = append(handlers, informerHandler{evInf.Informer(), f.recordEvent})
	}
	return handlers
}

// start starts the informers and waits for their caches; when recording,
// it notes the events of the first list (see recordEvent) and records the
// first state. It returns ctx's error when the caches did not sync, or the
// event lister's.
func (f *follower) start(ctx context.Context, record bool) error {
	for _, inf := range f.factories {
		inf.Start(ctx.Done())
	}
	for _, inf := range f.factories {
		for typ, ok := range inf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				f.shutdown()
				return fmt.Errorf("watching %v in namespace %s: %w", typ, f.ns, ctx.Err())
			}
		}
	}
	if f.evLister != nil && record {
		// The events of the first list happened before the watch: they keep
		// their own (whole-second) times; see recordEvent.
		evs, err := f.evLister.List(labels.Everything())
		if err != nil {
			f.shutdown()
			return err
		}
		f.mu.Lock()
		for _, e := range evs {
			f.listed[e.UID] = max(e.Count, 1)
		}
		f.mu.Unlock()
	}
	f.synced.Store(true)
	f.recordState(nil)
	return nil
}

// shutdown waits for the informers to stop (their context must be done).
func (f *follower) shutdown() {
	for _, inf := range f.factories {
		inf.Shutdown()
	}
}

func (f *follower) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// deployment returns the cached Deployment; a NotFound error once it is
// deleted (or replaced by one with another UID).
func (f *follower) deployment() (*appsv1.Deployment, error) {
	d, err := f.dLister.Get(f.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the rollout cannot end: %w", notFound(f.ns, f.name))
		}
		return nil, err
	}
	if d.UID != f.uid {
		return nil, fmt.Errorf("deployment %s/%s was deleted and created again while watching", f.ns, f.name)
	}
	return d, nil
}

// view builds the current view from the caches (see buildView).
func (f *follower) view(nEvents int, now time.Time) (*view, error) {
	d, err := f.deployment()
	if err != nil {
		return nil, err
	}
	rss, err := f.rsLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := f.podLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var events []*v1.Event
	if f.evLister != nil && nEvents > 0 {
		if events, err = f.evLister.List(labels.Everything()); err != nil {
			return nil, err
		}
	}
	return buildView(d, rss, pods, events, nEvents, now), nil
}

// recordState appends a timeline sample (the Deployment's counts and bounds,
// every ReplicaSet it controls) when it differs from the last one. It runs
// in the informers' handlers, after their caches took the change, so the
// sample's time is when the change arrived.
func (f *follower) recordState(any) {
	if f.rec == nil || !f.synced.Load() {
		return
	}
	now := time.Now()
	d, err := f.dLister.Get(f.name)
	if err != nil || d.UID != f.uid {
		return
	}
	rss, err := f.rsLister.List(labels.Everything())
	if err != nil {
		return
	}
	s := timeline.Sample{Time: now, Available: d.Status.AvailableReplicas, Total: d.Status.Replicas}
	owned := rolloutstate.ControlledBy(rss, d.UID)
	for _, rs := range owned {
		s.ReplicaSets = append(s.ReplicaSets, timeline.ReplicaSet{
			Name:      rs.Name,
			Revision:  rs.Annotations[rolloutstate.RevisionAnnotation],
			Replicas:  rolloutstate.ReplicaSetReplicas(rs),
			Ready:     rs.Status.ReadyReplicas,
			Available: rs.Status.AvailableReplicas,
		})
	}
	slices.SortFunc(s.ReplicaSets, func(a, b timeline.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	fp, _ := rolloutstate.FencepostsOf(d)
	maxTotal, minAvailable := fp.MaxTotal(), fp.MinAvailable()
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		// Recreate goes to 0 available by design: no floor to draw.
		minAvailable = 0
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rec
	if r.Start.IsZero() {
		r.Start = now
	}
	r.Replicas = rolloutstate.Replicas(d)
	r.MaxTotal, r.MinAvailable = maxTotal, minAvailable
	if newRS := rolloutstate.NewReplicaSet(d, owned); newRS != nil {
		f.rolloutStart = newRS.CreationTimestamp.Time
	}
	if n := len(r.Samples); n > 0 && sameState(r.Samples[n-1], s) {
		return
	}
	r.Samples = append(r.Samples, s)
}

// sameState reports whether two samples show the same counts.
func sameState(a, b timeline.Sample) bool {
	return a.Available == b.Available && a.Total == b.Total && slices.Equal(a.ReplicaSets, b.ReplicaSets)
}

// recordedEvent is a Deployment event as recorded, with its name to order
// events of the same second (see compareEvents).
type recordedEvent struct {
	name string
	timeline.Event
}

// recordEvent keeps an event of the watched Deployment for the timeline,
// once per count of an aggregated event: at the time it arrived when it was
// emitted while watching, at its lastTimestamp when it came with the first
// list; recording decides which are drawn.
func (f *follower) recordEvent(obj any) {
	e, ok := obj.(*v1.Event)
	// Events of an earlier Deployment of the same name have its UID.
	if !ok || f.rec == nil || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != f.uid) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if count := max(e.Count, 1); f.seen[e.UID] < count {
		f.seen[e.UID] = count
		// core/v1 event times have whole seconds: one emitted while watching
		// is marked when it arrived, to the millisecond.
		at := eventTime(*e)
		if f.synced.Load() && f.listed[e.UID] < count {
			at = time.Now()
		}
		f.events = append(f.events, recordedEvent{name: e.Name, Event: timeline.Event{Time: at, Type: e.Type, Reason: e.Reason, Message: e.Message}})
	}
}

// maxLookBack is how far before the first sample a recording may start:
// the watch usually starts just after the change that began the rollout,
// and the events of its first steps are drawn from when the new
// ReplicaSet was created, but not from an hour ago.
const maxLookBack = time.Minute

// recording returns a copy of the timeline so far (nil when not recording):
// it starts when the new ReplicaSet was created (at most maxLookBack before
// the first sample), ends now, and has the events from its start on, in
// time order. Events of earlier rollouts are left out.
func (f *follower) recording() *timeline.Recording {
	if f.rec == nil {
		return nil
	}
	// The informers' handlers run behind their caches: take what the caches
	// hold now, so that a short watch misses neither the last state nor the
	// events (both are recorded once only).
	f.recordState(nil)
	if f.evLister != nil {
		if evs, err := f.evLister.List(labels.Everything()); err == nil {
			for _, e := range evs {
				f.recordEvent(e)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := *f.rec
	r.End = time.Now()
	r.Samples = slices.Clone(r.Samples)
	if !r.Start.IsZero() && !f.rolloutStart.IsZero() && f.rolloutStart.Before(r.Start) {
		r.Start = maxTime(f.rolloutStart, r.Start.Add(-maxLookBack))
	}
	evs := slices.Clone(f.events)
	slices.SortFunc(evs, func(a, b recordedEvent) int {
		return compareEvents(v1.Event{ObjectMeta: metav1.ObjectMeta{Name: a.name}, LastTimestamp: metav1.NewTime(a.Time)},
			v1.Event{ObjectMeta: metav1.ObjectMeta{Name: b.name}, LastTimestamp: metav1.NewTime(b.Time)})
	})
	r.Events = nil
	for _, e := range evs {
		// Event times and creationTimestamps are whole seconds.
		if !e.Time.Before(r.Start.Truncate(time.Second)) {
			r.Events = append(r.Events, e.Event)
		}
	}
	return &r
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
