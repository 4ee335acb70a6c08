package deployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Name is the controller's queue name and the label value in its metrics.
const Name = "deployment"

// Resource names used with the IM-4 read-your-writes guard.
const (
	resourceReplicaSets = "replicasets"
	resourceDeployments = "deployments"
)

// Config is what the Deployment controller needs. Every field except Clock
// is required.
type Config struct {
	// Client writes ReplicaSets and Deployments and does the uncached
	// reads (IM-4, AD-3): apiclient.New over the manager's clientset.
	Client Client
	// Deployments is the Deployment informer.
	Deployments appsinformers.DeploymentInformer
	// ReplicaSets is the ReplicaSet informer; New adds ownership.ControllerIndex to it.
	ReplicaSets appsinformers.ReplicaSetInformer
	// Pods is the pod informer. Only delete events are used (EH-6..EH-8),
	// plus ownership.ControllerIndex (added by New) for the pod map (SD-4).
	Pods coreinformers.PodInformer
	// Recorder records events on Deployments; the manager builds it with
	// component "deployment-controller" (CM-8).
	Recorder record.EventRecorder
	// Clock is the time source for conditions, deadlines and the work queue's
	// delays (wake-ups, coalescing windows, backoff); default real.
	Clock clock.WithTicker
	// Observer, if set, is told the duration and error of every sync (metrics).
	Observer runner.Observer
	// Slots, if set, bounds the syncs in flight across every controller sharing it (sharded mode: the
	// replica's share of the fleet's --concurrent-*-syncs, following its buckets; runner.Slots).
	Slots *runner.Slots
	// Scope, if set, is the namespaces the controller acts on now (sharded mode, SH-9: the replica's buckets,
	// admitted and dropped while it runs): keys of other namespaces are dropped, the read-your-writes records
	// of namespaces about to be admitted are forgotten (SH-3), and every Deployment of namespaces just admitted
	// is enqueued once. Nil: every namespace, always.
	Scope *runner.Scope
	// MaxCacheWait is how long a Deployment's syncs wait for the caches to
	// show this controller's own writes before they read from the API server
	// (IM-4): 0 means 1 minute (expectations.DefaultMaxCacheWait), < 0 is
	// invalid.
	MaxCacheWait time.Duration
	// Templates, if set, is what the informers' transform noted of each Deployment's and ReplicaSet's stored
	// JSON (IM-8): ReplicaSets are created with the Deployment's pod template as stored (through Client's
	// CreateReplicaSetUnstructured), the pod-template-hash folds in the fingerprint of its unknown fields,
	// rollbacks patch a ReplicaSet's stored template back, and a Deployment with unknown fields outside its
	// template is not managed. The manager's, observe mode's shadow check's and `rollout plan`'s simulator's
	// syncs all have one, so all three name ReplicaSets alike. Nil: templates are the typed ones (tests of
	// typed objects).
	Templates *rawtemplate.Store
	// PendingCreations, if set, returns the pods the ReplicaSet controller of the same process has created, or
	// is about to create, for the ReplicaSet namespace/name and not yet observed (replicaset.Controller's
	// PendingCreations). EX-3 counts them in each ReplicaSet's footprint, so a ReplicaSet lowered while its
	// creations are in flight does not lend the new ReplicaSet room those pods will take. Nil counts none (a
	// ReplicaSet controller in another process: the bound then holds only as far as the caches show).
	PendingCreations func(namespace, name string) int
	// Analyzer, if set, takes the measurements of rollout steps' analyses (EX-6): internal/analysis's Source
	// in the manager. Nil: an analysis step holds its rollout and nothing is measured (the simulator of
	// `rollout plan`, observe mode's shadow check, which only predict).
	Analyzer Analyzer
	// StatusSyncWindow coalesces the syncs a ReplicaSet's status-only
	// updates cause to at most one per Deployment per window
	// (runner.EnqueueCoalesced); 0 syncs on every update, as upstream.
	// < 0 is invalid.
	StatusSyncWindow time.Duration
}

// Validate returns an error naming every missing or invalid field: the
// required ones, then a negative MaxCacheWait.
func (c Config) Validate() error {
	invalid := runner.NonNegative(map[string]time.Duration{"MaxCacheWait": c.MaxCacheWait, "StatusSyncWindow": c.StatusSyncWindow})
	required := runner.RequiredFields(map[string]any{
		"Client": c.Client, "Recorder": c.Recorder,
		"Deployments informer": c.Deployments, "ReplicaSets informer": c.ReplicaSets, "Pods informer": c.Pods,
	})
	return errors.Join(append(required, invalid...)...)
}

// Controller reconciles Deployments into ReplicaSets. Build it with New.
type Controller struct {
	// client writes; the listers and indexers read the informer caches.
	client     Client
	dLister    appslisters.DeploymentLister
	rsLister   appslisters.ReplicaSetLister
	rsIndexer  cache.Indexer
	podIndexer cache.Indexer

	// templates is Config.Templates.
	templates *rawtemplate.Store

	recorder record.EventRecorder
	clock    clock.Clock
	runner   *runner.Runner
	// pendingCreations is Config.PendingCreations (nil: none counted).
	pendingCreations func(namespace, name string) int
	// statusSyncWindow is Config.StatusSyncWindow.
	statusSyncWindow time.Duration
	// freshness is the IM-4 read-your-writes guard over the ReplicaSet and
	// Deployment caches.
	freshness *expectations.ReadYourWrites
	// analyses takes EX-6's measurements off the workers; nil without Config.Analyzer.
	analyses *measurements
}

// New builds the controller: it adds ownership.ControllerIndex to the
// ReplicaSet and pod informers and registers the event handlers (EH-1..EH-8).
// It returns an error for an invalid Config or when an informer refuses the
// index or a handler (e.g. because it already started).
func New(ctx context.Context, cfg Config) (*Controller, error) {
	c, err := newController(cfg)
	if err != nil {
		return nil, err
	}
	c.runner = runner.New(Name, c.syncDeployment, runner.WithObserver(cfg.Observer), runner.WithClock(cfg.Clock),
		runner.WithSlots(cfg.Slots), runner.WithScope(cfg.Scope))
	if cfg.Analyzer != nil {
		c.analyses = newMeasurements(cfg.Analyzer, func(key cache.ObjectName) { c.runner.Enqueue(key) })
	}
	if err := c.registerHandlers(klog.FromContext(ctx), cfg); err != nil {
		return nil, err
	}
	c.watchScope(cfg.Scope)
	return c, nil
}

// watchScope hooks the controller to scope (Config.Scope; nil: nothing): namespaces about to be admitted
// lose their read-your-writes records, and every cached Deployment of namespaces just admitted is enqueued.
func (c *Controller) watchScope(scope *runner.Scope) {
	if scope == nil {
		return
	}
	scope.Watch(runner.ScopeHooks{
		Forget: func(in func(string) bool) { c.freshness.ForgetNamespaces(in) },
		Admitted: func(in func(string) bool) {
			ds, _ := c.dLister.List(labels.Everything()) // a cache lister's List has no error
			for _, d := range ds {
				if in(d.Namespace) {
					c.runner.EnqueueObject(d)
				}
			}
		},
	})
}

// newController validates cfg and builds the controller's caches, indexes
// and guards: what New and NewSyncer share.
func newController(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid deployment controller config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	dInformer, rsInformer, podInformer := cfg.Deployments.Informer(), cfg.ReplicaSets.Informer(), cfg.Pods.Informer()
	if err := ownership.AddControllerIndex(rsInformer); err != nil {
		return nil, fmt.Errorf("deployment controller: adding the controller index to the ReplicaSet informer: %w", err)
	}
	if err := ownership.AddControllerIndex(podInformer); err != nil {
		return nil, fmt.Errorf("deployment controller: adding the controller index to the pod informer: %w", err)
	}
	c := &Controller{
		client:           cfg.Client,
		dLister:          cfg.Deployments.Lister(),
		rsLister:         cfg.ReplicaSets.Lister(),
		rsIndexer:        rsInformer.GetIndexer(),
		podIndexer:       podInformer.GetIndexer(),
		templates:        cfg.Templates,
		recorder:         cfg.Recorder,
		clock:            cfg.Clock,
		statusSyncWindow: cfg.StatusSyncWindow,
		pendingCreations: cfg.PendingCreations,
		freshness: expectations.NewReadYourWrites(Name, cfg.Clock, cfg.MaxCacheWait, map[string]expectations.Cache{
			resourceReplicaSets: expectations.InformerCache(rsInformer),
			resourceDeployments: expectations.InformerCache(dInformer),
		}),
	}
	return c, nil
}

// Run syncs Deployments with workers workers (CM-1: 5 in the controller
// manager) once the Deployment, ReplicaSet and pod caches have synced, until
// ctx is done. It blocks; the caller starts the informers.
func (c *Controller) Run(ctx context.Context, workers int) {
	if c.analyses != nil {
		c.analyses.setContext(ctx)
	}
	c.runner.Run(ctx, workers)
}

// HasSynced reports whether the three informers and this controller's
// handlers have seen their initial lists.
func (c *Controller) HasSynced() bool { return c.runner.HasSynced() }

// registerHandlers wires EH-1..EH-8; Run waits for them to sync. Handlers
// only enqueue (house style pattern 1).
func (c *Controller) registerHandlers(logger klog.Logger, cfg Config) error {
	return errors.Join(
		c.runner.Handle(cfg.Deployments.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onDeployment(logger, obj) },
			UpdateFunc: func(_, cur any) { c.onDeployment(logger, cur) },
			DeleteFunc: func(obj any) { c.onDeployment(logger, obj) },
		}),
		c.runner.Handle(cfg.ReplicaSets.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onReplicaSetAdd(logger, obj) },
			UpdateFunc: func(old, cur any) { c.onReplicaSetUpdate(logger, old, cur) },
			DeleteFunc: func(obj any) { c.onReplicaSetDelete(logger, obj) },
		}),
		c.runner.Handle(cfg.Pods.Informer(), cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { c.onPodDelete(logger, obj) },
		}),
	)
}
