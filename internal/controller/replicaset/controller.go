package replicaset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Name is the controller's queue name and the label value in its metrics.
const Name = "replicaset"

// Resource names used with the IM-4 read-your-writes guard.
const (
	resourcePods        = "pods"
	resourceReplicaSets = "replicasets"
)

// Validate returns an error naming every missing or invalid field.
func (c Config) Validate() error {
	errs := runner.RequiredFields(map[string]any{"Client": c.Client, "Recorder": c.Recorder,
		"ReplicaSets informer": c.ReplicaSets, "Pods informer": c.Pods})
	errs = append(errs, runner.NonNegative(map[string]time.Duration{
		"ExpectationsTimeout": c.ExpectationsTimeout, "MaxCacheWait": c.MaxCacheWait, "StatusSyncWindow": c.StatusSyncWindow})...)
	errs = append(errs, runner.NonNegative(map[string]int{"BurstReplicas": c.BurstReplicas})...)
	return errors.Join(errs...)
}

// Controller is the ReplicaSet controller: it keeps each ReplicaSet's active
// pods at spec.replicas and writes its status (spec section 12).
type Controller struct {
	// cfg is New's Config with defaults filled in: the client, recorder,
	// clock and burst size come from it.
	cfg        Config
	rsLister   appslisters.ReplicaSetLister
	podIndexer cache.Indexer
	// nodeLabels reads the node cache (EX-4); nil without Config.Nodes.
	nodeLabels nodeLabelsFunc

	expectations *expectations.Tracker
	// freshness is the IM-4 read-your-writes guard over the pod and
	// ReplicaSet caches.
	freshness *expectations.ReadYourWrites
	runner    *runner.Runner
	// podWrites holds a token for each pod create or delete in flight, across all workers
	// (maxPodWritesInFlight).
	podWrites chan struct{}
}

// New validates cfg, adds ownership.ControllerIndex and the pod-template-hash
// ownership.LabelIndex to the pod informer and
// registers the event handlers (EH-9..EH-12), which log with ctx's logger.
// It returns the Config error or the informer's error when the index or a
// handler cannot be added (e.g. the informer already started).
func New(ctx context.Context, cfg Config) (*Controller, error) {
	c, err := newController(cfg)
	if err != nil {
		return nil, err
	}
	c.runner = runner.New(Name, c.sync, runner.WithObserver(c.cfg.Observer), runner.WithClock(c.cfg.Clock),
		runner.WithSlots(c.cfg.Slots), runner.WithScope(c.cfg.Scope))
	if cfg.Nodes != nil {
		c.runner.WaitFor(cfg.Nodes.Informer().HasSynced)
	}
	c.watchScope(c.cfg.Scope)
	return c, c.registerHandlers(klog.FromContext(ctx), c.cfg)
}

// watchScope hooks the controller to scope (Config.Scope; nil: nothing): namespaces about to be admitted
// lose their expectations and read-your-writes records, and every cached ReplicaSet of namespaces just
// admitted is enqueued.
func (c *Controller) watchScope(scope *runner.Scope) {
	if scope == nil {
		return
	}
	scope.Watch(runner.ScopeHooks{
		Forget: func(in func(string) bool) {
			c.expectations.ForgetNamespaces(in)
			c.freshness.ForgetNamespaces(in)
		},
		Admitted: func(in func(string) bool) {
			rss, _ := c.rsLister.List(labels.Everything()) // a cache lister's List has no error
			for _, rs := range rss {
				if in(rs.Namespace) {
					c.runner.EnqueueObject(rs)
				}
			}
		},
	})
}

// newController validates cfg, fills its defaults and builds the
// controller's caches, indexes, expectations and guards: what New and
// NewSyncer share.
func newController(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid replicaset controller config: %w", err)
	}
	cfg = cfg.withDefaults()
	podInformer, rsInformer := cfg.Pods.Informer(), cfg.ReplicaSets.Informer()
	if err := ownership.AddControllerIndex(podInformer); err != nil {
		return nil, fmt.Errorf("replicaset controller: adding the controller index to the pod informer: %w", err)
	}
	if err := ownership.AddLabelIndex(podInformer, appsv1.DefaultDeploymentUniqueLabelKey); err != nil {
		return nil, fmt.Errorf("replicaset controller: adding the pod-template-hash index to the pod informer: %w", err)
	}
	c := &Controller{
		cfg:          cfg,
		rsLister:     cfg.ReplicaSets.Lister(),
		podIndexer:   podInformer.GetIndexer(),
		expectations: expectations.NewTracker(Name, cfg.Clock, cfg.ExpectationsTimeout),
		freshness: expectations.NewReadYourWrites(Name, cfg.Clock, cfg.MaxCacheWait, map[string]expectations.Cache{
			resourcePods:        expectations.InformerCache(podInformer),
			resourceReplicaSets: expectations.InformerCache(rsInformer),
		}),
		podWrites: make(chan struct{}, maxPodWritesInFlight),
	}
	if cfg.Nodes != nil {
		nodes := cfg.Nodes.Lister()
		cfg.Nodes.Informer() // registered with the factory before it starts
		c.nodeLabels = func(name string) (map[string]string, bool) {
			node, err := nodes.Get(name)
			if err != nil {
				return nil, false
			}
			return node.Labels, true
		}
	}
	return c, nil
}

// PendingCreations returns the pods this controller has created, or is about
// to create, for the ReplicaSet namespace/name and has not yet observed in
// its pod cache (its expectations, RS-9; 0 when none or expired). A
// Deployment controller in the same process counts them so that a
// ReplicaSet lowered while its creations are in flight is not taken to hold
// fewer pods than will exist (EX-3). Safe for concurrent use.
func (c *Controller) PendingCreations(namespace, name string) int {
	return c.expectations.PendingCreations(cache.ObjectName{Namespace: namespace, Name: name}.String())
}

// HasSynced reports whether the ReplicaSet and pod informers and this
// controller's handlers have seen their initial lists.
func (c *Controller) HasSynced() bool { return c.runner.HasSynced() }

// Run syncs ReplicaSets with workers workers (CM-1: 5 in the controller
// manager) once the ReplicaSet and pod caches have synced, until ctx is
// done. It blocks; the caller starts the informers.
func (c *Controller) Run(ctx context.Context, workers int) { c.runner.Run(ctx, workers) }

// registerHandlers wires EH-9..EH-12; Run waits for them to sync. Handlers
// only enqueue keys and observe expectations (house style pattern 1).
func (c *Controller) registerHandlers(logger klog.Logger, cfg Config) error {
	rsHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onReplicaSetAdd(logger, obj) },
		UpdateFunc: func(old, cur any) { c.onReplicaSetUpdate(logger, old, cur) },
		DeleteFunc: func(obj any) { c.onReplicaSetDelete(logger, obj) },
	}
	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPodAdd(logger, obj) },
		UpdateFunc: func(old, cur any) { c.onPodUpdate(logger, old, cur) },
		DeleteFunc: func(obj any) { c.onPodDelete(logger, obj) },
	}
	return errors.Join(c.runner.Handle(cfg.ReplicaSets.Informer(), rsHandler), c.runner.Handle(cfg.Pods.Informer(), podHandler))
}
