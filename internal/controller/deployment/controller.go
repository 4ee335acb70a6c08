package deployment

import (
	"context"
	"errors"

	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Config is what the Deployment controller needs. Every field except Clock
// is required.
type Config struct {
	// Client writes ReplicaSets and Deployments and does the uncached
	// Deployment read before adoption (AD-3).
	Client kubernetes.Interface
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
	// Clock is the time source for conditions and deadlines; default real.
	Clock clock.Clock
	// Observer, if set, is told the duration and error of every sync (metrics).
	Observer runner.Observer
}

// Validate returns an error naming the first missing required field.
func (c Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("deployment controller: Client is required")
	case c.Deployments == nil:
		return errors.New("deployment controller: Deployments informer is required")
	case c.ReplicaSets == nil:
		return errors.New("deployment controller: ReplicaSets informer is required")
	case c.Pods == nil:
		return errors.New("deployment controller: Pods informer is required")
	case c.Recorder == nil:
		return errors.New("deployment controller: Recorder is required")
	}
	return nil
}

// Controller reconciles Deployments into ReplicaSets. Build it with New.
type Controller struct {
	client     kubernetes.Interface
	dLister    appslisters.DeploymentLister
	rsLister   appslisters.ReplicaSetLister
	rsIndexer  cache.Indexer
	podIndexer cache.Indexer
	recorder   record.EventRecorder
	clock      clock.Clock
	runner     *runner.Runner
	synced     []cache.InformerSynced
	// writes remembers our last ReplicaSet writes per Deployment (IM-4).
	writes *writeTracker
	// enqueue adds a Deployment key; a test seam (defaults to the runner).
	enqueue func(key cache.ObjectName)
}

// New builds the controller: it adds ownership.ControllerIndex to the
// ReplicaSet and pod informers and registers the event handlers (EH-1..EH-8).
// It returns an error for an invalid Config or when an informer refuses the
// index or a handler (e.g. because it already started).
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	rsInformer, podInformer := cfg.ReplicaSets.Informer(), cfg.Pods.Informer()
	if err := ownership.AddControllerIndex(rsInformer); err != nil {
		return nil, err
	}
	if err := ownership.AddControllerIndex(podInformer); err != nil {
		return nil, err
	}
	c := &Controller{
		client:     cfg.Client,
		dLister:    cfg.Deployments.Lister(),
		rsLister:   cfg.ReplicaSets.Lister(),
		rsIndexer:  rsInformer.GetIndexer(),
		podIndexer: podInformer.GetIndexer(),
		recorder:   cfg.Recorder,
		clock:      cfg.Clock,
		writes:     newWriteTracker(),
	}
	var opts []runner.Option
	if cfg.Observer != nil {
		opts = append(opts, runner.WithObserver(cfg.Observer))
	}
	c.runner = runner.New("deployment", c.syncDeployment, opts...)
	c.enqueue = c.runner.Enqueue
	if err := c.registerHandlers(klog.FromContext(ctx), cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers sync workers until ctx
// is done (CM-1). It blocks; informers must be started by the caller.
func (c *Controller) Run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", "deployment")
	defer logger.Info("Shutting down controller", "controller", "deployment")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.runner.Run(ctx, workers)
}

// HasSynced reports whether the informer caches and handler registrations
// have delivered their initial lists.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}
