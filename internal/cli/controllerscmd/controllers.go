package controllerscmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// controllersOptions are the flags of `kubedeploy controllers` and `kubedeploy-controllers`, named as
// kube-controller-manager names them.
type controllersOptions struct {
	kubeconfig  string
	controllers string
	manager     manager.Config
	memory      memoryOptions
	logging     *logsapi.LoggingConfiguration
}

// NewCommand returns the `controllers` command: its flags, their validation into a manager.Config, and a RunE
// that runs the controllers (manager.Run) until the command's context ends or they fail. `kubedeploy controllers`
// and the `kubedeploy-controllers` binary are both this command; the binary renames it and adds --version.
func NewCommand() *cobra.Command {
	o := controllersOptions{logging: logsapi.NewLoggingConfiguration()}
	cmd := &cobra.Command{
		Use:   "controllers",
		Short: "Run only the kubedeploy controllers against an existing cluster, with leader election, health and metrics",
		Long: `Runs kubedeploy's Deployment and ReplicaSet controllers against the cluster from
--kubeconfig, else KUBECONFIG, else the in-cluster configuration (else ~/.kube/config).
Switch the cluster's own controllers off first (kube-controller-manager
--controllers=*,-deployment,-replicaset). With --leader-elect (default) only the holder of
the Lease runs the controllers; on SIGTERM it finishes in-flight syncs, releases the Lease
and exits 0; if it loses the Lease it stops its workers and exits 1.
With --sharding every replica is active instead: each holds a Lease of its own, owns buckets
of the namespace hash space (a ConfigMap, --shard-ring-name, in the Lease namespace) and
runs the controllers, and their informers, only for its namespaces (spec SH-1..SH-7).
/healthz, /livez, /readyz and /metrics are served over HTTPS on --bind-address:--secure-port,
authenticated and authorized by the API server like kube-controller-manager's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runControllers(cmd.Context(), &o)
		},
	}
	addControllersFlags(cmd, &o)
	return cmd
}

func addControllersFlags(cmd *cobra.Command, o *controllersOptions) {
	m, le := &o.manager, &o.manager.LeaderElection
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: KUBECONFIG, else in-cluster config, else ~/.kube/config)")
	f.StringVar(&o.controllers, "controllers", strings.Join(manager.KnownControllers, ","), "controllers to run ('*' for all)")
	f.IntVar(&m.ConcurrentDeploymentSyncs, "concurrent-deployment-syncs", 5, "Deployment syncs at once (>= 1); with --sharding the fleet's: each replica runs its share of the ring's buckets of them, at least 1")
	f.IntVar(&m.ConcurrentReplicaSetSyncs, "concurrent-replicaset-syncs", 5, "ReplicaSet syncs at once (>= 1); with --sharding the fleet's: each replica runs its share of the ring's buckets of them, at least 1")
	f.Float32Var(&m.QPS, "kube-api-qps", 20, "requests per second each controller may send to the API server")
	f.IntVar(&m.Burst, "kube-api-burst", 30, "burst of requests each controller may send to the API server")
	f.BoolVar(&le.Enabled, "leader-elect", true, "run the controllers only while holding the leader election Lease")
	f.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", manager.DefaultLeaseDuration, "how long a standby waits after the leader's last renewal before taking over")
	f.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", manager.DefaultRenewDeadline, "how long the leader tries to renew before it stops leading")
	f.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", manager.DefaultRetryPeriod, "time between attempts to acquire or renew the Lease")
	f.StringVar(&le.ResourceName, "leader-elect-resource-name", manager.DefaultResourceName, "name of the Lease")
	f.StringVar(&le.ResourceNamespace, "leader-elect-resource-namespace", manager.DefaultResourceNamespace, "namespace of the Lease")
	f.BoolVar(&m.Sharding.Enabled, "sharding", false, "run as one of several active replicas, each syncing only its share of namespaces (takes the place of --leader-elect; uses its durations and namespace)")
	f.IntVar(&m.Sharding.Buckets, "shard-buckets", manager.DefaultShardBuckets, "buckets of the namespace hash space in a ring this replica creates, 1..1024 (a ring that exists keeps its own)")
	f.DurationVar(&m.Sharding.ConsolidateAfter, "shard-consolidate-after", manager.DefaultConsolidateAfter, "no effect (deprecated): a replica runs one set of controllers, and a bucket's move restarts nothing else")
	_ = f.MarkDeprecated("shard-consolidate-after", "it has no effect: a sharded replica runs one set of controllers and moves a bucket without stopping or listing its others again (SH-9); remove it") // the flag exists
	f.StringVar(&m.Sharding.RingName, "shard-ring-name", shard.DefaultRingName, "name of the ConfigMap that holds the shard ring, in --leader-elect-resource-namespace")
	f.StringVar(&m.Sharding.LeaderLease, "shard-leader-lease", manager.DefaultResourceNamespace+"/"+manager.DefaultResourceName,
		"NAMESPACE/NAME of the Lease a leader-elected (unsharded) kubedeploy controllers holds: the sharded replicas hold it together while they run, so that the two modes never run at once (SH-10); \"-\" turns that off")
	f.IntVar(&m.Serving.Port, "secure-port", manager.DefaultSecurePort, "HTTPS port for /healthz, /readyz, /livez and /metrics, 0..65535 (0 disables)")
	f.StringVar(&m.Serving.BindAddress, "bind-address", "127.0.0.1", "IP address for --secure-port (0.0.0.0 for all interfaces, e.g. in a pod)")
	f.BoolVar(&m.Serving.Profiling, "profiling", true, "serve Go's pprof profiles under /debug/pprof/ on --secure-port, to users allowed get on that nonResourceURL")
	AddAnalysisFlags(f, &m.Prometheus)
	addMemoryFlags(f, &o.memory)
	logsapi.AddFlags(o.logging, f)
}

// config validates the flags and returns the manager configuration, without a RESTConfig.
func (o *controllersOptions) config() (manager.Config, error) {
	if err := o.check(); err != nil {
		return o.manager, err
	}
	cfg := o.manager
	cfg.Controllers = manager.ParseControllers(o.controllers)
	if len(cfg.Controllers) == 0 {
		return cfg, errors.New("--controllers names no controller")
	}
	return validated(cfg)
}

// check returns the first numeric flag of `controllers` outside its range, naming the flag and the range, in the
// order of the help. Zero is refused where manager.Config would read it as its default (workers, rate limits,
// leader election durations): a flag must mean what it says.
func (o *controllersOptions) check() error {
	m, le := &o.manager, &o.manager.LeaderElection
	return cliargs.First(
		cliargs.AtLeast("--concurrent-deployment-syncs", m.ConcurrentDeploymentSyncs, 1),
		cliargs.AtLeast("--concurrent-replicaset-syncs", m.ConcurrentReplicaSetSyncs, 1),
		checkClientFlags(m.QPS, m.Burst),
		cliargs.Positive("--leader-elect-lease-duration", le.LeaseDuration),
		cliargs.Positive("--leader-elect-renew-deadline", le.RenewDeadline),
		cliargs.Positive("--leader-elect-retry-period", le.RetryPeriod),
		checkLeaseOrder(*le, m.Sharding.Enabled),
		cliargs.InRange("--shard-buckets", m.Sharding.Buckets, 1, 1024),
		cliargs.AtLeast("--shard-consolidate-after", m.Sharding.ConsolidateAfter, 0),
		cliargs.InRange("--secure-port", m.Serving.Port, 0, 65535),
		o.memory.check(),
		checkLoggingFlags(o.logging),
	)
}

// checkClientFlags returns an error naming --kube-api-qps (requests/s, > 0) or --kube-api-burst (requests, >= 1)
// when out of range.
func checkClientFlags(qps float32, burst int) error {
	return cliargs.First(cliargs.Positive("--kube-api-qps", qps), cliargs.AtLeast("--kube-api-burst", burst, 1))
}

// checkLeaseOrder returns, when leader election or sharding is on, an error unless lease duration > renew
// deadline > retry period (client-go's rule, which manager.LeaderElection.Validate checks too; sharded replicas'
// Leases follow it), naming the flags.
func checkLeaseOrder(le manager.LeaderElection, sharding bool) error {
	switch {
	case !le.Enabled && !sharding:
		return nil
	case le.RenewDeadline <= le.RetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline must be greater than --leader-elect-retry-period (%v), got %v", le.RetryPeriod, le.RenewDeadline)
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline (%v), got %v", le.RenewDeadline, le.LeaseDuration)
	}
	return nil
}

// checkLoggingFlags returns an error naming --log-flush-frequency (> 0) or an info buffer size (>= 0 bytes) out
// of range; logsapi.ValidateAndApply checks the rest (format, feature gates).
func checkLoggingFlags(c *logsapi.LoggingConfiguration) error {
	return cliargs.First(
		cliargs.Positive("--log-flush-frequency", c.FlushFrequency.Duration.Duration),
		cliargs.AtLeast("--log-json-info-buffer-size", c.Options.JSON.InfoBufferSize.Value(), 0),
		cliargs.AtLeast("--log-text-info-buffer-size", c.Options.Text.InfoBufferSize.Value(), 0),
	)
}

// validated checks the manager configuration, filled with its version and defaults, and returns it without a
// RESTConfig. The commands check their flags' ranges first (check), so that Default turns no zero into a
// default.
func validated(cfg manager.Config) (manager.Config, error) {
	cfg.Version = buildinfo.Version()
	cfg.RESTConfig = &rest.Config{} // checked by Validate; replaced by the caller
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	cfg.RESTConfig = nil
	return cfg, nil
}

func runControllers(ctx context.Context, o *controllersOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	return runManager(ctx, cfg, o.kubeconfig, &o.memory, o.logging, "Starting kubedeploy controllers",
		"controllers", cfg.Controllers, "leaderElect", cfg.LeaderElection.Enabled && !cfg.Sharding.Enabled, "sharding", cfg.Sharding.Enabled, "identity", cfg.LeaderElection.Identity)
}

// runManager applies the memory policy (memory.apply) and the logging flags, loads the kubeconfig into cfg, logs
// msg with keysAndValues and the memory policy, and runs the manager until ctx ends or it fails.
func runManager(ctx context.Context, cfg manager.Config, kubeconfig string, memory *memoryOptions, logging *logsapi.LoggingConfiguration, msg string, keysAndValues ...any) error {
	policy := memory.apply()
	if err := logsapi.ValidateAndApply(logging, nil); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	defer klog.Flush()
	var err error
	if cfg.RESTConfig, err = loadRESTConfig(kubeconfig); err != nil {
		return err
	}
	logger := klog.Background().WithName("kubedeploy")
	kv := append([]any{"version", cfg.Version, "server", cfg.RESTConfig.Host}, policy.logValues()...)
	logger.Info(msg, append(kv, keysAndValues...)...)
	err = manager.Run(klog.NewContext(ctx, logger), cfg)
	if err == nil {
		logger.Info("Stopped")
	}
	return err
}

// loadRESTConfig returns the client configuration from path if set, else from
// KUBECONFIG if set, else in-cluster, else ~/.kube/config. Errors name the source.
func loadRESTConfig(path string) (*rest.Config, error) {
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}
