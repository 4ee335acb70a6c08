// Package watcher keeps `rollout watch`'s copy of one Deployment, the
// ReplicaSets and pods of its selector and its events, with client-go
// informers (one list, then watches: no polling), signals every change, and
// tells an Observer (the timeline recorder) what changed and when.
//
// It reads the cluster and never writes to it; it judges nothing (the view
// model does, from the Input it returns).
package watcher

import (
	"context"
	"fmt"
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
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
)

// Observer is told of the watched Deployment's changes, from the informers'
// handlers, after their caches hold the change (timeline.Recorder is one).
type Observer interface {
	// Synced is called once, when every cache has its first list, with the
	// events listed then.
	Synced(events []*v1.Event)
	// State is called with the Deployment and the ReplicaSets of its
	// selector right after Synced and after every later change to either.
	State(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, at time.Time)
	// Event is called for every event of the Deployment added or updated.
	Event(e *v1.Event, at time.Time)
}

// Config says what a Watcher watches besides the Deployment, its
// ReplicaSets and pods.
type Config struct {
	// Events: also watch the Deployment's events.
	Events bool
	// Nodes: also watch the cluster's nodes (their names and labels are kept), for the spread of a
	// Deployment annotated kubedeploy.io/scale-down-spread (EX-4). It needs list and watch on nodes.
	Nodes bool
	// AnalysisTemplates: also watch the namespace's analysis templates (ConfigMaps labelled
	// kubedeploy.io/analysis-template: "true"), for the counts and conditions of the analyses' metrics (EX-6).
	// It needs list and watch on configmaps.
	AnalysisTemplates bool
	// Observer, when not nil, is told of every change.
	Observer Observer
	// Clock stamps the changes the Observer is told of; nil is the real one.
	Clock clock.PassiveClock
}

// Watcher follows one Deployment; see Start.
type Watcher struct {
	ns, name string
	uid      types.UID
	cfg      Config

	factories  []informers.SharedInformerFactory
	dLister    appslisters.DeploymentNamespaceLister
	rsLister   appslisters.ReplicaSetNamespaceLister
	podLister  corelisters.PodNamespaceLister
	evLister   corelisters.EventNamespaceLister     // nil without cfg.Events
	nodeLister corelisters.NodeLister               // nil without cfg.Nodes
	cmLister   corelisters.ConfigMapNamespaceLister // nil without cfg.AnalysisTemplates

	// changed receives (without blocking the informers) after any change.
	changed chan struct{}
	// synced is set once every cache has its first list: the Observer is told states from then on (a
	// half-filled cache would show a false start).
	synced atomic.Bool
}

// Start starts the informers for d (d by name; the ReplicaSets and pods of
// its selector in its namespace; its events with cfg.Events) and waits for
// their first lists. They run until ctx ends; call Shutdown after ctx is
// done. It returns an error when d's selector is invalid or empty, or when
// ctx ends before the lists arrive.
func Start(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, cfg Config) (*Watcher, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	if sel.Empty() {
		// Validation forbids an empty selector; never watch every pod for one.
		return nil, fmt.Errorf("deployment %s/%s has an empty selector", d.Namespace, d.Name)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	w := &Watcher{ns: d.Namespace, name: d.Name, uid: d.UID, cfg: cfg, changed: make(chan struct{}, 1)}
	for inf, observe := range w.informers(client, d, sel) {
		on := func(obj any) {
			if observe != nil && w.cfg.Observer != nil {
				observe(obj)
			}
			w.signal()
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    on,
			UpdateFunc: func(_, cur any) { on(cur) },
			DeleteFunc: on,
		}); err != nil {
			return nil, err
		}
	}
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// informers builds the watcher's informer factories and listers, and
// returns each informer with what it tells the Observer (nil: nothing).
func (w *Watcher) informers(client kubernetes.Interface, d *appsv1.Deployment, sel labels.Selector) map[cache.SharedIndexInformer]func(any) {
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(d.Namespace), informers.WithTweakListOptions(tweak))
		w.factories = append(w.factories, inf)
		return inf
	}
	byName := factory(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", d.Name).String()
	})
	bySelector := factory(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() })
	dInf := byName.Apps().V1().Deployments()
	rsInf := bySelector.Apps().V1().ReplicaSets()
	podInf := bySelector.Core().V1().Pods()
	w.dLister = dInf.Lister().Deployments(d.Namespace)
	w.rsLister = rsInf.Lister().ReplicaSets(d.Namespace)
	w.podLister = podInf.Lister().Pods(d.Namespace)
	state := func(any) { w.observeState() }
	out := map[cache.SharedIndexInformer]func(any){dInf.Informer(): state, rsInf.Informer(): state, podInf.Informer(): nil}
	if w.cfg.Events {
		byObject := factory(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.Set{"involvedObject.kind": "Deployment", "involvedObject.name": d.Name}.AsSelector().String()
		})
		evInf := byObject.Core().V1().Events()
		w.evLister = evInf.Lister().Events(d.Namespace)
		out[evInf.Informer()] = func(obj any) {
			if e, ok := obj.(*v1.Event); ok {
				w.cfg.Observer.Event(e, w.cfg.Clock.Now())
			}
		}
	}
	if w.cfg.Nodes {
		clusterWide := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(nodeLabelsOnly))
		w.factories = append(w.factories, clusterWide)
		nodeInf := clusterWide.Core().V1().Nodes()
		w.nodeLister = nodeInf.Lister()
		out[nodeInf.Informer()] = nil
	}
	if w.cfg.AnalysisTemplates {
		templates := factory(func(o *metav1.ListOptions) { o.LabelSelector = AnalysisTemplateSelector })
		cmInf := templates.Core().V1().ConfigMaps()
		w.cmLister = cmInf.Lister().ConfigMaps(d.Namespace)
		out[cmInf.Informer()] = nil
	}
	return out
}

// AnalysisTemplateSelector selects the analysis templates among a namespace's ConfigMaps (EX-6).
const AnalysisTemplateSelector = analysis.TemplateLabel + "=true"

// nodeLabelsOnly is the node informer's transform: a node's name and labels are all the view reads of it.
func nodeLabelsOnly(obj any) (any, error) {
	if n, ok := obj.(*v1.Node); ok && n != nil {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels}}, nil
	}
	return obj, nil
}

// start starts the informers, waits for their caches and tells the
// Observer they synced, with the first list's events and state. It returns
// ctx's error when the caches did not sync, or the event lister's.
func (w *Watcher) start(ctx context.Context) error {
	for _, inf := range w.factories {
		inf.Start(ctx.Done())
	}
	for _, inf := range w.factories {
		for typ, ok := range inf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				w.Shutdown()
				return fmt.Errorf("watching %v in namespace %s: %w", typ, w.ns, ctx.Err())
			}
		}
	}
	if w.cfg.Observer == nil {
		return nil
	}
	var evs []*v1.Event
	if w.evLister != nil {
		var err error
		if evs, err = w.evLister.List(labels.Everything()); err != nil {
			w.Shutdown()
			return err
		}
	}
	w.cfg.Observer.Synced(evs)
	w.synced.Store(true)
	w.observeState()
	return nil
}

// Shutdown waits for the informers to stop (Start's ctx must be done).
func (w *Watcher) Shutdown() {
	for _, inf := range w.factories {
		inf.Shutdown()
	}
}

// Changed receives after any change to the watched objects; changes that
// arrive while nobody reads are folded into one.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

func (w *Watcher) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Deployment returns the cached Deployment; a NotFound error once it is
// deleted, and an error once it was replaced by one with another UID.
func (w *Watcher) Deployment() (*appsv1.Deployment, error) {
	d, err := w.dLister.Get(w.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the rollout cannot end: %w", apierrors.NewNotFound(appsv1.Resource("deployments"), w.ns+"/"+w.name))
		}
		return nil, err
	}
	if d.UID != w.uid {
		return nil, fmt.Errorf("deployment %s/%s was deleted and created again while watching", w.ns, w.name)
	}
	return d, nil
}

// Input returns what the caches hold now, for the view model, with the
// latest maxEvents events (none without Config.Events), the nodes (none
// without Config.Nodes) and the analysis templates (none without
// Config.AnalysisTemplates). The objects are the
// caches' own: read-only.
func (w *Watcher) Input(maxEvents int) (viewmodel.Input, error) {
	d, err := w.Deployment()
	if err != nil {
		return viewmodel.Input{}, err
	}
	in := viewmodel.Input{Deployment: d, MaxEvents: maxEvents}
	if in.ReplicaSets, err = w.rsLister.List(labels.Everything()); err != nil {
		return viewmodel.Input{}, err
	}
	if in.Pods, err = w.podLister.List(labels.Everything()); err != nil {
		return viewmodel.Input{}, err
	}
	if w.evLister != nil && maxEvents > 0 {
		if in.Events, err = w.evLister.List(labels.Everything()); err != nil {
			return viewmodel.Input{}, err
		}
	}
	if w.nodeLister != nil {
		if in.Nodes, err = w.nodeLister.List(labels.Everything()); err != nil {
			return viewmodel.Input{}, err
		}
	}
	if w.cmLister != nil {
		if in.AnalysisTemplates, err = w.cmLister.List(labels.Everything()); err != nil {
			return viewmodel.Input{}, err
		}
	}
	return in, nil
}

// Flush tells the Observer the state and events the caches hold now: the
// informers' handlers run behind their caches, so a short watch would miss
// the last state or event without it. The Observer keeps each once.
func (w *Watcher) Flush() {
	if w.cfg.Observer == nil {
		return
	}
	w.observeState()
	if w.evLister == nil {
		return
	}
	if evs, err := w.evLister.List(labels.Everything()); err == nil {
		for _, e := range evs {
			w.cfg.Observer.Event(e, w.cfg.Clock.Now())
		}
	}
}

// observeState tells the Observer the Deployment and its selector's
// ReplicaSets as cached now; nothing before the caches synced or while the
// Deployment is gone.
func (w *Watcher) observeState() {
	if !w.synced.Load() {
		return
	}
	now := w.cfg.Clock.Now()
	d, err := w.dLister.Get(w.name)
	if err != nil || d.UID != w.uid {
		return
	}
	rss, err := w.rsLister.List(labels.Everything())
	if err != nil {
		return
	}
	w.cfg.Observer.State(d, rss, now)
}
