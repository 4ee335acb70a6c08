package manager

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
	"github.com/kubedeploy/kubedeploy/internal/rolloutmetrics"
	"github.com/kubedeploy/kubedeploy/internal/serving"
)

// Controller names accepted in Config.Controllers (as kube-controller-manager's --controllers names them).
const (
	DeploymentController = "deployment"
	ReplicaSetController = "replicaset"
)

// KnownControllers lists every controller this manager can run, sorted.
var KnownControllers = []string{DeploymentController, ReplicaSetController}

// minResyncPeriod is kube-controller-manager's default --min-resync-period (CM-5).
const minResyncPeriod = 12 * time.Hour

// Config says what to run and how to reach the API server.
type Config struct {
	// RESTConfig reaches the API server; it is copied, never modified.
	RESTConfig *rest.Config
	// Controllers to run: a subset of KnownControllers. Empty runs none.
	Controllers []string
	// ConcurrentDeploymentSyncs is the number of Deployment workers (CM-1, default 5).
	ConcurrentDeploymentSyncs int
	// ConcurrentReplicaSetSyncs is the number of ReplicaSet workers (CM-1, default 5).
	ConcurrentReplicaSetSyncs int
	// QPS and Burst limit each controller's client, in requests/s and requests (CM-6, defaults 20 and 30).
	QPS   float32
	Burst int
	// Version goes into the user agent.
	Version string
	// ExpectationsTimeout is the ReplicaSet controller's expectations TTL
	// (RS-8); 0 means 5 minutes. Tests shorten it.
	ExpectationsTimeout time.Duration
	// MaxCacheWait is how long a controller waits for its informer caches to
	// show its own writes before it reads from the API server instead (IM-4);
	// 0 means 1 minute. Tests shorten it.
	MaxCacheWait time.Duration
	// StatusSyncWindow coalesces the syncs that can only rewrite status (a
	// pod's readiness, a ReplicaSet's counts) to one per object per window
	// (issue 10); 0 means DefaultStatusSyncWindow, negative syncs on every
	// event as upstream does.
	StatusSyncWindow time.Duration
	// LeaderElection, when enabled, runs the controllers only while this process holds the Lease (CM-7).
	LeaderElection LeaderElection
	// Serving, when enabled, serves /healthz, /readyz, /livez and /metrics over HTTPS.
	Serving Serving
	// Connectivity says how often the API server is probed and an outage
	// logged (defaults 5s and 30s); while it is unreachable, /readyz fails.
	Connectivity Connectivity
	// Observe is observe mode (issue 25): no controller runs, only the informers, the rollout metrics,
	// kubedeploy_deployment_unavailable_pods and the shadow check (internal/shadow), and nothing is written to
	// the API server (no Lease, no events). Controllers must be empty and leader election off; Serving is
	// served over plain HTTP (Serving.Plain).
	Observe bool
	// ShadowQuiet is how long observe mode's shadow check waits to see a divergent Deployment unchanged
	// before it reports it (shadow.DefaultQuiet, 5 s, when 0); < 0 is invalid.
	ShadowQuiet time.Duration
	// Started, if set, is called from Run's goroutines each time the
	// controllers have started (with leader election: once this process
	// leads) and their informer caches have synced; with no controllers,
	// once at the start. `kubedeploy up` reports ready from it.
	Started func()
}

// DefaultStatusSyncWindow is Config.StatusSyncWindow's default: in a rollout,
// each pod change made the ReplicaSet and then the Deployment write status,
// one pair of writes per pod (issue 10's benchmark); a quarter second bounds
// that to four per object per second and delays a status by at most that.
const DefaultStatusSyncWindow = 250 * time.Millisecond

// Default fills zero values with kube-controller-manager's defaults (CM-1, CM-6)
// and StatusSyncWindow with DefaultStatusSyncWindow; in observe mode it sets
// Serving.Plain.
func (c *Config) Default() {
	if c.ConcurrentDeploymentSyncs == 0 {
		c.ConcurrentDeploymentSyncs = 5
	}
	if c.ConcurrentReplicaSetSyncs == 0 {
		c.ConcurrentReplicaSetSyncs = 5
	}
	if c.QPS == 0 {
		c.QPS = 20
	}
	if c.Burst == 0 {
		c.Burst = 30
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.StatusSyncWindow == 0 {
		c.StatusSyncWindow = DefaultStatusSyncWindow
	}
	c.LeaderElection.Default()
	c.Connectivity.Default()
	if c.Observe {
		c.Serving.Plain = true
	}
}

// Validate returns an error naming the first bad field: a missing RESTConfig,
// an unknown or repeated controller name, a non-positive worker count, QPS or
// burst, inconsistent leader election durations, a negative probe or log
// interval or shadow quiet time, or a bad port or bind address.
func (c Config) Validate() error {
	if c.RESTConfig == nil {
		return fmt.Errorf("no API server configuration")
	}
	if c.Observe && (len(c.Controllers) > 0 || c.LeaderElection.Enabled) {
		return errors.New("observe mode runs no controllers and needs no leader election")
	}
	if err := ValidateControllers(c.Controllers); err != nil {
		return err
	}
	if c.ConcurrentDeploymentSyncs < 1 || c.ConcurrentReplicaSetSyncs < 1 {
		return fmt.Errorf("concurrent syncs must be at least 1")
	}
	if c.QPS <= 0 || c.Burst < 1 {
		return fmt.Errorf("kube-api-qps must be > 0 and kube-api-burst >= 1")
	}
	if c.ExpectationsTimeout < 0 || c.MaxCacheWait < 0 || c.ShadowQuiet < 0 {
		return fmt.Errorf("expectations timeout, max cache wait and shadow quiet time must not be negative")
	}
	if err := c.LeaderElection.Validate(); err != nil {
		return err
	}
	if err := c.Connectivity.Validate(); err != nil {
		return err
	}
	return c.Serving.Validate()
}

// ValidateControllers returns an error for an unknown or repeated controller name.
func ValidateControllers(names []string) error {
	seen := map[string]bool{}
	for _, name := range names {
		if !slices.Contains(KnownControllers, name) {
			return fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(KnownControllers, ", "))
		}
		if seen[name] {
			return fmt.Errorf("controller %q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

// ParseControllers turns a --controllers value ("deployment,replicaset", "*",
// or "" for none) into a sorted list of names. "*" means every known controller.
func ParseControllers(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
		case "*":
			out = append(out, KnownControllers...)
		default:
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// UserAgent returns the user agent, and so the default field manager, of the
// named controller's client: "kubedeploy-<name>-controller/<version>".
func UserAgent(controller, version string) string {
	return fmt.Sprintf("kubedeploy-%s-controller/%s", controller, version)
}

// EventSource returns the event source component of the named controller, as upstream names it (CM-8).
func EventSource(controller string) string { return controller + "-controller" }

// restConfigFor is the named controller's client configuration: its user
// agent (so its field manager), the configured QPS and burst.
func (c Config) restConfigFor(controller string) *rest.Config {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.UserAgent = UserAgent(controller, c.Version)
	cfg.QPS = c.QPS
	cfg.Burst = c.Burst
	return cfg
}

// clientFor builds the named controller's client, which speaks protobuf.
func (c Config) clientFor(controller string) (kubernetes.Interface, error) {
	client, _, _, err := c.clientsFor(controller, false)
	return client, err
}

// clientsFor builds the named controller's protobuf client and, when
// withDynamic, its JSON client for the Deployments and ReplicaSets whose
// pod template has fields kubedeploy's API does not know (IM-8,
// rawtemplate), and returns the protobuf client's configuration too. All
// share one rate limiter, so that QPS and Burst limit the controller as a
// whole.
func (c Config) clientsFor(controller string, withDynamic bool) (kubernetes.Interface, dynamic.Interface, *rest.Config, error) {
	cfg := c.restConfigFor(controller)
	if withDynamic && cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var dyn dynamic.Interface
	if withDynamic {
		var err error
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, nil, nil, fmt.Errorf("building the JSON client for the %s controller: %w", controller, err)
		}
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("building client for the %s controller: %w", controller, err)
	}
	return cs, dyn, cfg, nil
}

// runnable is what both controllers offer.
type runnable interface {
	Run(ctx context.Context, workers int)
	HasSynced() bool
}

// Run runs the configured controllers until ctx is cancelled, then waits for
// in-flight syncs to finish and, with leader election, releases the Lease.
// With leader election the controllers run only while this process holds the
// Lease (CM-7); when it loses the Lease, Run stops the workers, waits for
// in-flight syncs and returns ErrLeaderElectionLost. With Serving enabled it
// serves health and metrics (on standby too) until it returns. From the start
// (on standby and before caches sync too) until it returns it probes the API
// server, logs while that is unreachable and fails /readyz. Other errors:
// bad config, a client or controller that cannot be built, a port that cannot
// be bound. With no controllers it only waits for ctx.
func Run(ctx context.Context, cfg Config) error {
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return err
	}
	registerMetrics()
	logger := klog.FromContext(ctx)
	if len(cfg.Controllers) == 0 && !cfg.Observe {
		logger.Info("No controllers to run")
		if cfg.Started != nil {
			cfg.Started()
		}
		<-ctx.Done()
		return nil
	}
	conn, err := cfg.newAPIServerConnection()
	if err != nil {
		return err
	}
	// IM-8: refuse a server older than this build supports; one that cannot be asked now is checked when it answers.
	if refused, readErr := conn.skew.check(ctx); refused != nil {
		return refused
	} else if readErr != nil {
		logger.Info("Could not read the API server's version; it is checked when the server answers", "err", readErr)
	}
	probeCtx, stopProbing := context.WithCancel(context.WithoutCancel(ctx))
	probing := make(chan struct{})
	go func() { defer close(probing); conn.run(probeCtx) }()
	defer func() { stopProbing(); <-probing }()
	var (
		syncCheck serving.SyncCheck
		watchdog  *leaderelection.HealthzAdaptor
		runErr    error
	)
	if cfg.LeaderElection.Enabled {
		// As kube-controller-manager: unhealthy when leading but not renewed for RenewDeadline + 20s.
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if cfg.Serving.Enabled() {
		serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
		defer stopServing()
		if err := cfg.startServing(serveCtx, watchdog, &syncCheck, conn); err != nil {
			return err
		}
	}
	if cfg.Observe {
		return runObserving(ctx, cfg, &syncCheck)
	}
	run := func(ctx context.Context) { runErr = runControllers(ctx, cfg, &syncCheck) }
	if !cfg.LeaderElection.Enabled {
		run(ctx)
		return runErr
	}
	client, err := cfg.clientFor("leader-election")
	if err != nil {
		return err
	}
	err = runLeading(ctx, cfg.LeaderElection, client, watchdog, run)
	if runErr != nil {
		return runErr
	}
	return err
}

// startServing serves health and metrics; see serve. The API server
// connection check is a readiness check only: an outage must not get the
// process restarted.
func (c Config) startServing(ctx context.Context, watchdog *leaderelection.HealthzAdaptor, syncCheck *serving.SyncCheck, conn *apiServerConnection) error {
	live := []healthz.HealthChecker{healthz.PingHealthz}
	if watchdog != nil {
		live = append(live, watchdog)
	}
	if c.Serving.Plain {
		return serving.Plain(ctx, c.Serving, live, syncCheck, conn)
	}
	client, err := c.clientFor("auth-delegator")
	if err != nil {
		return err
	}
	return serving.Secure(ctx, c.Serving, client, live, syncCheck, conn)
}

// newAPIServerConnection returns the API server probe, through a client with
// the controllers' credentials (so it needs no RBAC of its own; see probeAPIServer).
func (c Config) newAPIServerConnection() (*apiServerConnection, error) {
	client, err := c.clientFor("apiserver-probe")
	if err != nil {
		return nil, err
	}
	server, _, err := rest.DefaultServerUrlFor(c.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("API server URL: %w", err)
	}
	return newAPIServerConnection(server.String(), client.Discovery().RESTClient(), c.Connectivity), nil
}

// runControllers builds the configured controllers, starts the informers,
// runs the workers and blocks until ctx is cancelled; then it waits for
// in-flight syncs to finish and stops the event broadcasters. It returns an
// error only when the controllers cannot be built.
func runControllers(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck) error {
	logger := klog.FromContext(ctx)
	infClient, infDynamic, infConfig, err := cfg.clientsFor("shared-informers", true)
	if err != nil {
		return err
	}
	resync := time.Duration(float64(minResyncPeriod) * (1 + rand.Float64()))
	// Caches hold no managedFields (CM-5), and pods only the fields the controllers read (issue 10). Deployments
	// and ReplicaSets whose stored form has fields we do not know are read as JSON too, their pod templates kept
	// (IM-8).
	templates := rawtemplate.NewStore(logger, infDynamic)
	factory := informers.NewSharedInformerFactoryWithOptions(infClient, resync, informers.WithTransform(podcache.Transform))
	if err := templates.Informers(factory, infConfig); err != nil {
		return err
	}

	var (
		ctrls       []runnable
		workers     []int
		broadcaster []record.EventBroadcaster
	)
	defer func() {
		factory.Shutdown()
		for _, b := range broadcaster {
			b.Shutdown()
		}
	}()
	nodes := slices.Contains(cfg.Controllers, ReplicaSetController) && nodesReadable(ctx, infClient)
	for _, name := range cfg.Controllers {
		client, dyn, _, err := cfg.clientsFor(name, true)
		if err != nil {
			return err
		}
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartStructuredLogging(3)
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		broadcaster = append(broadcaster, b)
		recorder := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventSource(name)})
		ctrl, n, err := newController(ctx, cfg, name, controllerClients{client, dyn, templates, nodes}, factory, recorder)
		if err != nil {
			return err
		}
		ctrls, workers = append(ctrls, ctrl), append(workers, n)
	}
	if slices.Contains(cfg.Controllers, DeploymentController) {
		// kubedeploy_deployment_unavailable_pods (issue 11) reads the Deployment controller's caches.
		stop := rolloutmetrics.UseUnavailablePods(factory, logger)
		defer stop()
		stopUnsupported := unsupportedFields.use(templates)
		defer stopUnsupported()
		// The rollout metrics (issue 25) follow the same caches.
		feeder, stopRollouts, err := rolloutmetrics.FeedFromInformers(ctx, factory)
		if err != nil {
			return err
		}
		defer stopRollouts()
		go feeder.Run(ctx)
	}
	synced := func() bool {
		return !slices.ContainsFunc(ctrls, func(c runnable) bool { return !c.HasSynced() })
	}
	syncCheck.Set(synced)
	defer syncCheck.Set(nil)
	factory.Start(ctx.Done())
	logger.Info("Started controllers", "controllers", cfg.Controllers)
	if cfg.Started != nil {
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), synced) {
				cfg.Started()
			}
		}()
	}

	var wg sync.WaitGroup
	for i, ctrl := range ctrls {
		wg.Go(func() { ctrl.Run(ctx, workers[i]) })
	}
	wg.Wait()
	logger.Info("Stopped controllers")
	return nil
}

// controllerClients are what one controller writes with: its typed client,
// its JSON client and the template store of the shared informers; and
// whether the shared informers may watch nodes.
type controllerClients struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	templates *rawtemplate.Store
	nodes     bool
}

// nodesReadable reports whether client may list nodes, which the ReplicaSet
// controller watches for EX-4 (kubedeploy.io/scale-down-spread). A cluster
// whose kubedeploy RBAC predates it answers 403: the controller then runs
// without the node informer (annotated ReplicaSets scale down by RS-14's
// ranking alone) and the error says what to apply, rather than waiting
// forever for a cache that cannot fill. Any other error is taken as
// transient (the informer retries), so it reports true.
func nodesReadable(ctx context.Context, client kubernetes.Interface) bool {
	_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Error(err, "Cannot list nodes: kubedeploy.io/scale-down-spread (EX-4) is off; apply deploy/10-rbac-replicaset.yaml to turn it on")
		return false
	}
	return true
}

func newController(ctx context.Context, cfg Config, name string, cc controllerClients,
	factory informers.SharedInformerFactory, recorder record.EventRecorder) (runnable, int, error) {
	ctx = klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), EventSource(name)))
	switch name {
	case DeploymentController:
		c, err := deployment.New(ctx, deployment.Config{
			Client:       apiclient.New(cc.client),
			Templates:    cc.templates,
			Dynamic:      cc.dynamic,
			Deployments:  factory.Apps().V1().Deployments(),
			ReplicaSets:  factory.Apps().V1().ReplicaSets(),
			Pods:         factory.Core().V1().Pods(),
			Recorder:     recorder,
			Observer:     syncObserver{},
			MaxCacheWait: cfg.MaxCacheWait,

			StatusSyncWindow: max(0, cfg.StatusSyncWindow),
		})
		return c, cfg.ConcurrentDeploymentSyncs, err
	case ReplicaSetController:
		rsCfg := replicaset.Config{
			Client:              apiclient.New(cc.client),
			Templates:           cc.templates,
			Dynamic:             cc.dynamic,
			ReplicaSets:         factory.Apps().V1().ReplicaSets(),
			Pods:                factory.Core().V1().Pods(),
			Recorder:            recorder,
			Observer:            syncObserver{},
			ExpectationsTimeout: cfg.ExpectationsTimeout,
			MaxCacheWait:        cfg.MaxCacheWait,
			StatusSyncWindow:    max(0, cfg.StatusSyncWindow),
		}
		if cc.nodes {
			rsCfg.Nodes = factory.Core().V1().Nodes()
		}
		c, err := replicaset.New(ctx, rsCfg)
		return c, cfg.ConcurrentReplicaSetSyncs, err
	}
	return nil, 0, fmt.Errorf("unknown controller %q", name)
}
