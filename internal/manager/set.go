package manager

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// minResyncPeriod is kube-controller-manager's default --min-resync-period (CM-5).
const minResyncPeriod = 12 * time.Hour

// ControllerSet is the configured controllers (Config.Controllers, built from controllerTable) over one set of
// shared informers, started and stopped as one value: one client, rate limiter, event broadcaster and worker
// pool per controller, one informer factory for all, and the controllers' companions (metrics). A process may
// run several side by side; a sharded replica runs one, over union informers of its buckets' (shardedSet).
// Build it with NewControllerSet, then Start it once and Stop it once.
type ControllerSet struct {
	names        []string
	logger       klog.Logger
	factory      informers.SharedInformerFactory
	ctrls        []Runnable
	workers      []int
	broadcasters []record.EventBroadcaster
	// runs are the companions' loops, stops what undoes them.
	runs  []func(context.Context)
	stops []func()

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewControllerSet builds cfg's controllers (cfg defaulted and valid) over a new shared informer factory,
// logging with ctx's logger; nothing runs before Start. It returns an error when a client, an informer or a
// controller cannot be built, having released what it built.
func NewControllerSet(ctx context.Context, cfg Config) (*ControllerSet, error) {
	infClient, in, err := newSharedInformers(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return newControllerSetOver(ctx, infClient, in)
}

// newControllerSetOver builds in.Config's controllers over in's informers (in.Readable asked of infClient, the
// informers' client); nothing runs before Start. It returns an error when a client or a controller cannot be
// built, having released what it built (in.Informers shut down).
func newControllerSetOver(ctx context.Context, infClient kubernetes.Interface, in Inputs) (*ControllerSet, error) {
	s := &ControllerSet{names: in.Config.Controllers, logger: klog.FromContext(ctx), factory: in.Informers}
	in.Readable = optionalInformersReadable(ctx, in.Config.Controllers, infClient)
	for _, name := range in.Config.Controllers {
		if err := s.add(ctx, name, in); err != nil {
			s.release()
			return nil, err
		}
	}
	if err := s.attachCompanions(ctx, in); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// newSharedInformers returns the shared informers' client and the Inputs every controller of a set shares: the
// informer factory (newInformerFactory, every namespace) and its rawtemplate store.
func newSharedInformers(ctx context.Context, cfg Config) (kubernetes.Interface, Inputs, error) {
	infClient, infDynamic, infConfig, err := cfg.clientsFor("shared-informers", true)
	if err != nil {
		return nil, Inputs{}, err
	}
	templates := rawtemplate.NewStore(klog.FromContext(ctx), infDynamic)
	factory, err := newInformerFactory(infClient, infConfig, templates, resyncPeriod(), nil)
	if err != nil {
		return nil, Inputs{}, err
	}
	return infClient, Inputs{Config: cfg, Informers: factory, Templates: templates, Creations: &podCreations{}}, nil
}

// resyncPeriod returns a resync period jittered in [12h, 24h) (CM-5).
func resyncPeriod() time.Duration {
	return time.Duration(float64(minResyncPeriod) * (1 + rand.Float64()))
}

// newInformerFactory returns a shared informer factory of resync period resync over infClient whose caches
// hold no managedFields (CM-5) and pods only the fields the controllers read (issue 10; podcache.Transform, after
// podcache.NewClient decoded only those, issue 48), and whose Deployments and ReplicaSets are templates' checked
// informers through infConfig (whose stored form has fields we do not know are read as JSON too, their pod
// templates kept, IM-8). A non-nil scoped restricts the pod, Deployment and ReplicaSet informers to some
// namespaces (SH-4: shard.Scope.ListWatch). The error is the pod client's or the template store's.
func newInformerFactory(infClient kubernetes.Interface, infConfig *rest.Config, templates *rawtemplate.Store, resync time.Duration,
	scoped func(cache.ListerWatcher) cache.ListerWatcher) (informers.SharedInformerFactory, error) {
	podClient, err := podcache.NewClient(infConfig)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(infClient, resync, informers.WithTransform(podcache.Transform))
	factory.InformerFor(&v1.Pod{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		var lw cache.ListerWatcher = podListWatch(podClient, metav1.NamespaceAll)
		if scoped != nil {
			lw = scoped(lw)
		}
		return cache.NewSharedIndexInformer(lw, &v1.Pod{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
	if err := templates.Informers(factory, infConfig, scoped); err != nil {
		factory.Shutdown()
		return nil, err
	}
	return factory, nil
}

// podListWatch lists and watches the pods of namespace ("" for every namespace) through client.
func podListWatch(client kubernetes.Interface, namespace string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
}

// optionalInformersReadable asks, once per resource, whether client may list each optional informer of the
// named controllers.
func optionalInformersReadable(ctx context.Context, names []string, client kubernetes.Interface) map[schema.GroupResource]bool {
	readable := map[schema.GroupResource]bool{}
	for _, name := range names {
		c, _ := lookupController(name)
		for _, o := range c.OptionalInformers {
			if _, asked := readable[o.Resource]; !asked {
				readable[o.Resource] = o.Readable(ctx, client)
			}
		}
	}
	return readable
}

// add builds the named controller with its own clients (user agent UserAgent(name), one rate limiter) and
// event broadcaster (source EventSource(name), CM-8); it logs as EventSource(name).
func (s *ControllerSet) add(ctx context.Context, name string, in Inputs) error {
	c, _ := lookupController(name) // cfg is valid
	client, dyn, _, err := in.Config.clientsFor(name, true)
	if err != nil {
		return err
	}
	// The broadcaster lives as long as the set (release shuts it down), not as ctx: events of syncs still
	// finishing after ctx ended (a graceful stop) are recorded instead of logged as errors.
	b := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	s.broadcasters = append(s.broadcasters, b)
	in.Client, in.Dynamic = client, dyn
	in.Recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventSource(name)})
	ctrl, err := c.New(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), EventSource(name))), in)
	if err != nil {
		return err
	}
	s.ctrls, s.workers = append(s.ctrls, ctrl), append(s.workers, c.Workers(in.Config))
	return nil
}

// attachCompanions attaches the companions of the set's controllers to its informers.
func (s *ControllerSet) attachCompanions(ctx context.Context, in Inputs) error {
	for _, name := range s.names {
		c, _ := lookupController(name)
		if c.Companions == nil {
			continue
		}
		run, stop, err := c.Companions(ctx, in)
		if err != nil {
			return err
		}
		s.stops = append(s.stops, stop)
		if run != nil {
			s.runs = append(s.runs, run)
		}
	}
	return nil
}

// HasSynced reports whether every controller's informer caches have synced.
func (s *ControllerSet) HasSynced() bool {
	return !slices.ContainsFunc(s.ctrls, func(c Runnable) bool { return !c.HasSynced() })
}

// Start starts the informers, the companions and every controller's workers, and returns; they run until ctx
// ends or Stop is called.
func (s *ControllerSet) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.factory.Start(ctx.Done())
	s.logger.Info("Started controllers", "controllers", s.names)
	for _, run := range s.runs {
		go run(ctx)
	}
	for i, ctrl := range s.ctrls {
		s.wg.Go(func() { ctrl.Run(ctx, s.workers[i]) })
	}
}

// Stop stops the workers and waits for in-flight syncs to finish, then stops the companions, the informers
// and the event broadcasters. Call it once, after Start.
func (s *ControllerSet) Stop() {
	s.cancel()
	s.wg.Wait()
	s.logger.Info("Stopped controllers")
	s.release()
}

// eventFlushGrace is how long a stopped set's event broadcasters keep writing the events its last syncs recorded
// before they shut down (client-go's broadcaster logs an error for every event still queued when it shuts down).
const eventFlushGrace = 2 * time.Second

// release stops the companions (last attached first) and the informers, and shuts the event broadcasters down
// eventFlushGrace later, without waiting.
func (s *ControllerSet) release() {
	for _, stop := range slices.Backward(s.stops) {
		stop()
	}
	s.factory.Shutdown()
	broadcasters := s.broadcasters
	time.AfterFunc(eventFlushGrace, func() {
		for _, b := range broadcasters {
			b.Shutdown()
		}
	})
}
