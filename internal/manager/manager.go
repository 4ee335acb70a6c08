package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/serving"
)

// DefaultSecurePort is the default port of `kubedeploy controllers` for /healthz, /readyz, /livez and /metrics
// (serving.DefaultSecurePort, 10260).
const DefaultSecurePort = serving.DefaultSecurePort

// Serving configures the endpoint serving /healthz, /livez, /readyz and /metrics: HTTPS with delegated
// authentication and authorization, or plain HTTP in observe mode; see serving.Config.
type Serving = serving.Config

// Config says what to run and how to reach the API server.
type Config struct {
	// RESTConfig reaches the API server; it is copied, never modified.
	RESTConfig *rest.Config
	// Controllers to run: a subset of KnownControllers. Empty runs none.
	Controllers []string
	// Prometheus is where rollout steps' analyses send their queries (EX-6): the controllers' --prometheus-url
	// and --analysis-allowed-addresses. The zero value sends none (a prometheus metric then measures Error).
	Prometheus analysis.Prometheus
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
	// In sharded mode its durations, namespace and identity serve the replica's own Lease instead.
	LeaderElection LeaderElection
	// Sharding, when enabled, runs this replica's controllers only for the namespaces of the buckets it owns,
	// beside other active replicas (issue 35, SH-1…SH-7); it takes the place of leader election.
	Sharding Sharding
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
	// shard, set only on the Config of a sharded replica's ControllerSet (one bucket or several), scopes its
	// informers and fences its writes.
	shard *shardContext
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
	c.Sharding.Default()
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
	if c.Observe && (len(c.Controllers) > 0 || c.LeaderElection.Enabled || c.Sharding.Enabled) {
		return errors.New("observe mode runs no controllers and needs no leader election or sharding")
	}
	if err := c.Sharding.Validate(); err != nil {
		return err
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
	le := c.LeaderElection
	le.Enabled = le.Enabled || c.Sharding.Enabled // sharded mode uses the same durations
	if err := le.Validate(); err != nil {
		return err
	}
	if err := c.Connectivity.Validate(); err != nil {
		return err
	}
	if err := c.Prometheus.Validate(); err != nil {
		return err
	}
	return c.Serving.Validate()
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
	if len(cfg.Controllers) == 0 && !cfg.Observe {
		return idle(ctx, cfg)
	}
	conn, err := cfg.connectAPIServer(ctx)
	if err != nil {
		return err
	}
	defer conn.start(ctx)()
	var (
		syncCheck serving.SyncCheck
		watchdog  *leaderelection.HealthzAdaptor
		other     = &otherMode{logger: klog.FromContext(ctx)}
	)
	if cfg.LeaderElection.Enabled && !cfg.Sharding.Enabled {
		// As kube-controller-manager: unhealthy when leading but not renewed for RenewDeadline + 20s.
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if cfg.Serving.Enabled() {
		serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
		defer stopServing()
		if err := cfg.startServing(serveCtx, watchdog, &syncCheck, conn, other); err != nil {
			return err
		}
	}
	if cfg.Observe {
		return runObserving(ctx, cfg, &syncCheck)
	}
	if cfg.Sharding.Enabled {
		return runSharded(ctx, cfg, &syncCheck, other)
	}
	return runElected(ctx, cfg, watchdog, &syncCheck, other)
}

// idle is Run with no controllers: it reports started and waits for ctx.
func idle(ctx context.Context, cfg Config) error {
	klog.FromContext(ctx).Info("No controllers to run")
	if cfg.Started != nil {
		cfg.Started()
	}
	<-ctx.Done()
	return nil
}

// runElected runs a ControllerSet of cfg's controllers (runSet) until ctx ends, with leader election only
// while this process holds the Lease. It returns the set's build error, else runLeading's (nil, or
// ErrLeaderElectionLost), or the leader election client's.
func runElected(ctx context.Context, cfg Config, watchdog *leaderelection.HealthzAdaptor, syncCheck *serving.SyncCheck, other *otherMode) error {
	var runErr error
	run := func(ctx context.Context) { runErr = runSet(ctx, cfg, syncCheck) }
	client, err := cfg.clientFor("leader-election")
	if err != nil {
		return err
	}
	if !cfg.LeaderElection.Enabled {
		if err := waitForShardedReplicas(ctx, cfg.LeaderElection, client, other); err != nil {
			return nil // ctx ended while waiting
		}
		run(ctx)
		return runErr
	}
	err = runLeading(ctx, cfg.LeaderElection, client, watchdog, run, other)
	if runErr != nil {
		return runErr
	}
	return err
}

// runSet builds a ControllerSet of cfg's controllers, runs it until ctx is
// cancelled and stops it (in-flight syncs finish); syncCheck follows its
// caches meanwhile, and cfg.Started is called once they have synced. It
// returns an error only when the set cannot be built.
func runSet(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck) error {
	set, err := NewControllerSet(ctx, cfg)
	if err != nil {
		return err
	}
	syncCheck.Set(set.HasSynced)
	set.Start(ctx)
	if cfg.Started != nil {
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), set.HasSynced) {
				cfg.Started()
			}
		}()
	}
	<-ctx.Done()
	set.Stop()
	syncCheck.Set(nil)
	return nil
}

// startServing serves health and metrics (serving.Secure, or serving.Plain
// in observe mode). The API server connection check is a readiness check
// only: an outage must not get the process restarted. It returns the
// serving error, or the auth-delegator client's.
func (c Config) startServing(ctx context.Context, watchdog *leaderelection.HealthzAdaptor, syncCheck *serving.SyncCheck, conn *apiServerConnection, other *otherMode) error {
	live := []healthz.HealthChecker{healthz.PingHealthz}
	if watchdog != nil {
		live = append(live, watchdog)
	}
	if c.Serving.Plain {
		return serving.Plain(ctx, c.Serving, live, syncCheck, conn, other)
	}
	client, err := c.clientFor("auth-delegator")
	if err != nil {
		return err
	}
	return serving.Secure(ctx, c.Serving, client, live, syncCheck, conn, other)
}

// connectAPIServer returns the API server probe, through a client with the
// controllers' credentials (so it needs no RBAC of its own; see
// probeAPIServer), having read the server's version once (IM-8). It returns
// the refusal of a server older than this build supports; one that cannot be
// asked now is logged and checked when it answers. Other errors: the client's,
// or the server URL's.
func (c Config) connectAPIServer(ctx context.Context) (*apiServerConnection, error) {
	client, err := c.clientFor("apiserver-probe")
	if err != nil {
		return nil, err
	}
	server, _, err := rest.DefaultServerUrlFor(c.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("API server URL: %w", err)
	}
	conn := newAPIServerConnection(server.String(), client.Discovery().RESTClient(), c.Connectivity)
	if refused, readErr := conn.skew.check(ctx); refused != nil {
		return nil, refused
	} else if readErr != nil {
		klog.FromContext(ctx).Info("Could not read the API server's version; it is checked when the server answers", "err", readErr)
	}
	return conn, nil
}
