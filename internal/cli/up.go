package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/manager"
)

// upOptions are the flags of `kubedeploy up`.
type upOptions struct {
	dataDir             string
	apiPort             int
	nodes               int
	zones               int
	podStartupDelay     time.Duration
	podTerminationDelay time.Duration
	controllers         string
	kubeControllers     string
	qps                 float32
	// prometheus is --prometheus-url and --analysis-allowed-addresses (EX-6), as `kubedeploy controllers` has them.
	prometheus      analysis.Prometheus
	burst           int
	verbosity       int
	featureGates    string
	auditPolicyFile string
	auditLogPath    string
}

func newUpCommand() *cobra.Command {
	o := upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local control plane with the kubedeploy controllers and run until interrupted",
		Long: `Starts, in this process: embedded etcd, kube-apiserver on 127.0.0.1, kube-scheduler,
kube-controller-manager with its default controllers (endpoints and endpointslices, job,
cronjob, daemonset, statefulset, resourcequota, disruption, garbage collector, namespace,
service accounts, node lifecycle, persistent volumes, ...; never its deployment or
replicaset controllers), KWOK-simulated nodes and pods, and kubedeploy's own Deployment and
ReplicaSet controllers. State lives in --data-dir; starting again on the same data dir
resumes with every object intact.

Simulated pods get an IP and become Ready after --pod-startup-delay; they run no process and
serve no traffic. A Job's pods succeed one startup delay after they become Ready. Pods with
an image tag starting with "broken" (nginx:broken) or the tag "404" (webserver:404) are
never pulled: they stay in ImagePullBackOff.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// addFlags registers up's flags on f, bound to o, with their defaults.
func (o *upOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "directory holding etcd data, certificates, the kubeconfig and logs")
	f.IntVar(&o.apiPort, "api-port", 6443, "kube-apiserver port on 127.0.0.1, 0..65535 (0 picks a free port)")
	f.IntVar(&o.nodes, "nodes", controlplane.DefaultNodes, fmt.Sprintf("number of simulated nodes, 1..%d (each fits %d pods)", maxNodes, controlplane.NodePodCapacity))
	f.IntVar(&o.zones, "zones", 1, fmt.Sprintf("number of zones the nodes are spread over, round-robin: above 1, each node is labelled topology.kubernetes.io/zone=zone-a, zone-b, … and topology.kubernetes.io/region=%s (at most --nodes and %d)", controlplane.RegionName, controlplane.MaxZones))
	f.DurationVar(&o.podStartupDelay, "pod-startup-delay", controlplane.DefaultPodStartupDelay, "time from a pod being scheduled to it being Running and Ready (> 0)")
	f.DurationVar(&o.podTerminationDelay, "pod-termination-delay", controlplane.DefaultPodTerminationDelay, "time a deleted pod stays Terminating before it is gone (> 0)")
	f.StringVar(&o.controllers, "controllers", strings.Join(manager.KnownControllers, ","), "kubedeploy controllers to run ('*' for all, '' for none)")
	f.StringVar(&o.kubeControllers, "kube-controllers", "*", "kube-controller-manager controllers to run, in its --controllers syntax: '*' is all of its default ones but deployment and replicaset, 'name' adds one, '-name' removes one (e.g. '*,-job-controller,-cronjob-controller')")
	// Like the embedded scheduler and controller manager, kubedeploy's
	// controllers talk to this kube-apiserver over loopback in one process:
	// `kubedeploy controllers`' 20/30 (kube-controller-manager's, CM-6) would
	// only throttle the cluster against itself: once the burst is spent they
	// space pod creations 50 ms apart, one rollout step's pods turn Ready
	// over more than a status window, and the rollout no longer takes the
	// steps `rollout plan` predicts (issue 11).
	f.Float32Var(&o.qps, "kube-api-qps", controlplane.LoopbackQPS, "requests per second each kubedeploy controller may send to the API server (kube-controller-manager's default is 20)")
	controllerscmd.AddAnalysisFlags(f, &o.prometheus)
	f.IntVar(&o.burst, "kube-api-burst", controlplane.LoopbackBurst, "burst of requests each kubedeploy controller may send to the API server (kube-controller-manager's default is 30)")
	f.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity of the kubedeploy controllers (>= 0)")
	f.StringVar(&o.featureGates, "feature-gates", "", fmt.Sprintf("kube-apiserver feature gates in its syntax 'A=true,B=false', applied over up's %s (alpha, for 'kubedeploy controllers --sharding'); e.g. ShardedListAndWatch=false turns it off", controlplane.DefaultFeatureGates))
	f.StringVar(&o.auditPolicyFile, "audit-policy-file", "", "kube-apiserver audit policy (an audit.k8s.io/v1 Policy); needs --audit-log-path")
	f.StringVar(&o.auditLogPath, "audit-log-path", "", "file kube-apiserver writes audit events to, one JSON object a line, as its own --audit-log-path: created with its directory, appended to, rotated at 100 MB keeping 100 old files ('-', stdout, is refused); needs --audit-policy-file")
}

func runUp(ctx context.Context, o upOptions, stdout, stderr io.Writer) error {
	mcfg, cfg, err := o.configs()
	if err != nil {
		return err
	}
	cp, err := controlplane.New(cfg)
	if err != nil {
		return err
	}
	// Nothing in the data dir is created or changed before the cheap checks
	// (data dir in use, API port) pass; a start that fails after them
	// removes what this run added, our logs included (issue 33).
	if err := cp.Prepare(); err != nil {
		return err
	}
	ourLogger, closeLogs, err := upLogs(o.dataDir, o.verbosity)
	if err != nil {
		return errors.Join(err, cp.Stop())
	}
	defer closeLogs()
	started := time.Now()
	fmt.Fprintf(stdout, "Starting the control plane in %s ...\n", cfg.DataDir)
	// Ctrl-C aborts the start, but once up runs it must stop the controllers
	// first (they release their Lease and flush events through the API
	// server) and the control plane last, in cp.Stop below: the control
	// plane's lifetime is detached from ctx when the start is done.
	cpCtx, cancelCP := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCP()
	abortStart := context.AfterFunc(ctx, cancelCP)
	if err := cp.Start(cpCtx); err != nil {
		return err
	}
	if !abortStart() {
		return errors.Join(ctx.Err(), cp.Stop())
	}
	if mcfg.RESTConfig, err = controllersIdentity(ctx, cp, len(mcfg.Controllers) > 0); err != nil {
		return errors.Join(err, cp.Stop())
	}
	ready := func(leading bool) {
		printReady(stdout, cp, mcfg.Controllers, time.Since(started))
		if !leading {
			fmt.Fprintf(stdout, "  (the controllers are standing by: another process holds the Lease %s/%s)\n",
				mcfg.LeaderElection.ResourceNamespace, mcfg.LeaderElection.ResourceName)
		}
	}
	runErr := runControllersUntilDone(klog.NewContext(ctx, ourLogger), cp, mcfg, ready)
	if err := cp.Stop(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if runErr == nil {
		fmt.Fprintf(stdout, "Stopped; state is kept in %s.\n", o.dataDir)
	}
	return runErr
}

// maxNodes is the most simulated nodes --nodes takes (controlplane.Config's bound).
const maxNodes = 1000

// check returns the first numeric flag outside its range, as "<flag> must be
// in <lo>..<hi>, got <v>" (or "at least", "greater than 0"), in the order of
// up's help. The pod delays must be above 0 as well as not negative:
// controlplane.Config reads 0 as its default, 1s, and the flag must mean
// what it says; so must --kube-api-qps and --kube-api-burst (manager.Config
// would turn 0 into 20 and 30).
func (o upOptions) check() error {
	return cliargs.First(
		cliargs.InRange("--api-port", o.apiPort, 0, 65535),
		cliargs.InRange("--nodes", o.nodes, 1, maxNodes),
		cliargs.InRange("--zones", o.zones, 1, controlplane.MaxZones),
		zonesWithinNodes(o.zones, o.nodes),
		cliargs.Positive("--pod-startup-delay", o.podStartupDelay),
		cliargs.Positive("--pod-termination-delay", o.podTerminationDelay),
		cliargs.Positive("--kube-api-qps", o.qps),
		o.prometheus.Validate(),
		cliargs.AtLeast("--kube-api-burst", o.burst, 1),
		cliargs.AtLeast("-v", o.verbosity, 0),
		featureGatesFlag(o.featureGates),
		auditFlags(o.auditPolicyFile, o.auditLogPath),
	)
}

// featureGatesFlag returns the error kube-apiserver would give for --feature-gates (applied over
// controlplane.DefaultFeatureGates), naming the flag: bad syntax, an unknown gate or a locked one.
func featureGatesFlag(gates string) error {
	if err := controlplane.ValidateFeatureGates(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	return nil
}

// auditFlags returns an error, naming the flag, unless --audit-policy-file and --audit-log-path are both empty or
// name a readable, valid audit policy and a file ("-", kube-apiserver's standard output, would mix audit events
// into up's terminal). It only reads the policy file.
func auditFlags(policyFile, logPath string) error {
	switch {
	case policyFile == "" && logPath == "":
		return nil
	case policyFile == "":
		return errors.New("--audit-log-path needs --audit-policy-file: without a policy kube-apiserver audits nothing")
	case logPath == "":
		return errors.New("--audit-policy-file needs --audit-log-path, the file the audit events go to")
	case logPath == "-":
		return errors.New(`--audit-log-path "-" (standard output) is not supported: give a file`)
	}
	if err := controlplane.ValidateAuditPolicy(policyFile); err != nil {
		return fmt.Errorf("--audit-policy-file %w", err)
	}
	return nil
}

// zonesWithinNodes returns an error when there are more zones than nodes: a
// zone without a node could hold no pod.
func zonesWithinNodes(zones, nodes int) error {
	if zones > nodes {
		return fmt.Errorf("--zones must be at most --nodes (%d), got %d: every zone needs a node", nodes, zones)
	}
	return nil
}

// configs turns the flags into the controllers' and the control plane's
// configuration, defaulted and validated; it returns the first invalid one.
// It touches nothing: neither the data dir nor the port.
func (o upOptions) configs() (manager.Config, controlplane.Config, error) {
	if err := o.check(); err != nil {
		return manager.Config{}, controlplane.Config{}, err
	}
	mcfg := manager.Config{
		Controllers: manager.ParseControllers(o.controllers),
		Version:     buildinfo.Version(),
		QPS:         o.qps,
		Burst:       o.burst,
		Prometheus:  o.prometheus,
		// The same Lease as `kubedeploy controllers`: one run against this
		// cluster stands by while these controllers lead.
		LeaderElection: manager.LeaderElection{Enabled: true, Identity: upIdentity(o.dataDir)},
	}
	mcfg.Default()
	kubeControllers, err := controlplane.ParseKubeControllers(o.kubeControllers)
	if err != nil {
		return mcfg, controlplane.Config{}, fmt.Errorf("--kube-controllers: %w", err)
	}
	cfg := controlplane.Config{
		KubeControllers:     kubeControllers,
		DataDir:             o.dataDir,
		APIPort:             o.apiPort,
		Nodes:               o.nodes,
		Zones:               o.zones,
		PodStartupDelay:     o.podStartupDelay,
		PodTerminationDelay: o.podTerminationDelay,
		FeatureGates:        o.featureGates,
		AuditPolicyFile:     o.auditPolicyFile,
		AuditLogPath:        o.auditLogPath,
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return mcfg, cfg, err
	}
	return mcfg, cfg, manager.ValidateControllers(mcfg.Controllers)
}

// readyWait is how long up waits for its controllers to lead before it
// reports ready anyway, saying they stand by: a Lease held by a live
// `kubedeploy controllers` expires only when that process stops.
const readyWait = 30 * time.Second

// runControllersUntilDone runs the controllers (manager.Run with mcfg) until
// ctx ends (Ctrl-C), the control plane stops or the controllers fail, then
// stops the controllers and waits for them. It calls ready(true) once the
// controllers lead and their caches have synced (manager.Config.Started), or
// ready(false) if that has not happened within readyWait. It returns why it
// stopped: nil for Ctrl-C, else the control plane's or the controllers'
// error.
func runControllersUntilDone(ctx context.Context, cp *controlplane.ControlPlane, mcfg manager.Config, ready func(leading bool)) error {
	started := make(chan struct{})
	var once sync.Once
	mcfg.Started = func() { once.Do(func() { close(started) }) }
	mctx, cancelManager := context.WithCancel(ctx)
	managerDone := make(chan error, 1)
	go func() { managerDone <- manager.Run(mctx, mcfg) }()

	wait := time.NewTimer(readyWait)
	defer wait.Stop()
	waitC := wait.C
	var runErr error
loop:
	for {
		select {
		case <-started:
			ready(true)
			started, waitC = nil, nil
		case <-waitC:
			ready(false)
			started, waitC = nil, nil
		case <-ctx.Done():
			break loop
		case <-cp.Done():
			runErr = fmt.Errorf("control plane stopped: %w", cp.Err())
			break loop
		case err := <-managerDone:
			managerDone <- err
			if err != nil {
				runErr = fmt.Errorf("controllers stopped: %w", err)
			}
			break loop
		}
	}
	cancelManager()
	if err := <-managerDone; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// upIdentity returns the leader-election identity of `up` on dataDir:
// "<hostname>_up-<first 12 hex digits of the SHA-256 of dataDir's absolute
// path>". It is the same at every start on that data dir, so after an
// unclean stop (kill -9) the restarted process takes its own Lease at once
// instead of waiting LeaseDuration for it to expire (issue 9). It is safe
// because the data dir lock lets one `up` at a time run on it.
func upIdentity(dataDir string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	sum := sha256.Sum256([]byte(dataDir))
	return fmt.Sprintf("%s_up-%x", host, sum[:6])
}

// controllersIdentity applies, when apply is set, deploy/'s Namespace, ServiceAccount and RBAC with the admin
// client (idempotently), and returns a client configuration for that ServiceAccount's user name with no groups,
// so the controllers have only the permissions the manifests grant. up applies them only when it runs
// controllers of its own: with --controllers= the cluster is left for an install of deploy/ or of the Helm chart
// (deploy/chart), which must own those objects (Helm refuses to install over objects it did not make). It
// returns the first API error.
func controllersIdentity(ctx context.Context, cp *controlplane.ControlPlane, apply bool) (*rest.Config, error) {
	if apply {
		admin, err := kubernetes.NewForConfig(cp.AdminConfig())
		if err != nil {
			return nil, err
		}
		if err := deploy.ApplyIdentity(ctx, admin); err != nil {
			return nil, fmt.Errorf("applying the controllers' RBAC from deploy/: %w", err)
		}
	}
	return cp.ClientConfig(deploy.User)
}

// printReady prints up's banner once the cluster and its controllers are
// ready: how long the start took, the API server, the controllers, the
// cluster, the kubeconfig, what to try next (tryHints: runnable as printed in
// another shell) and where the logs are.
func printReady(w io.Writer, cp *controlplane.ControlPlane, controllers []string, took time.Duration) {
	fmt.Fprintf(w, "kubedeploy is up (%.1fs): API server %s, controllers %v\n", took.Seconds(), cp.Server(), controllers)
	zones := ""
	if cp.Zones() > 1 {
		zones = fmt.Sprintf(" in %d zones (%s…%s)", cp.Zones(), controlplane.ZoneName(0), controlplane.ZoneName(cp.Zones()-1))
	}
	fmt.Fprintf(w, "  cluster:    %d simulated nodes%s; kube-controller-manager runs %d controllers (--kube-controllers)\n", cp.Nodes(), zones, len(cp.KubeControllers()))
	try := newTryHints(cp.KubeconfigPath(), len(controllers) > 0)
	fmt.Fprintf(w, "  kubeconfig: %s\n", try.kubeconfig)
	for i, line := range try.lines() {
		label := "try:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, line)
	}
	fmt.Fprintf(w, "  logs:       %s (controllers; control-plane.log and etcd.log beside it)\n", filepath.Join(filepath.Dir(try.kubeconfig), "logs", "kubedeploy.log"))
	fmt.Fprintf(w, "Press Ctrl-C to stop; state is kept in the data dir.\n")
}

// captureStrayStderr points file descriptor 2 at path (truncated, mode 0600)
// for as long as up runs, and os.Stderr at a copy of the terminal's: what
// libraries write to stderr behind klog's back (kube-apiserver's etcd client
// logs JSON warnings there when its requests are cancelled at shutdown) goes
// to the file, while up's own errors still reach the terminal. A crash's
// stack trace lands in the file too. The returned function puts fd 2 back.
// It returns an error when the file cannot be created or fd 2 not moved.
func captureStrayStderr(path string) (restore func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir is not writable: %w", err)
	}
	saved, err := unix.Dup(2)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("saving stderr: %w", err)
	}
	if err := unix.Dup3(int(f.Fd()), 2, 0); err != nil {
		_ = unix.Close(saved)
		_ = f.Close()
		return nil, fmt.Errorf("redirecting stderr: %w", err)
	}
	terminal := os.Stderr
	os.Stderr = os.NewFile(uintptr(saved), "/dev/stderr")
	return func() {
		_ = unix.Dup3(saved, 2, 0)
		_ = os.Stderr.Close()
		os.Stderr = terminal
		_ = f.Close()
	}, nil
}

// upLogs sends the control plane's logs to <data-dir>/logs/control-plane.log
// and stray stderr to logs/stderr.log, and returns the logger of up's
// controllers, writing to logs/kubedeploy.log (rotated) at verbosity v: the
// terminal shows only up's own lines. The returned function closes all three
// and puts stderr back. Errors: a log file cannot be created.
func upLogs(dataDir string, v int) (klog.Logger, func(), error) {
	closeLogs, err := redirectComponentLogs(dataDir)
	if err != nil {
		return klog.Logger{}, nil, err
	}
	restoreStderr, err := captureStrayStderr(filepath.Join(dataDir, "logs", "stderr.log"))
	if err != nil {
		closeLogs()
		return klog.Logger{}, nil, err
	}
	ourLog := controlplane.RotatingLog(filepath.Join(dataDir, "logs", "kubedeploy.log"))
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(ourLog), textlogger.Verbosity(v)))
	return logger, func() {
		_ = ourLog.Close()
		restoreStderr()
		closeLogs()
	}, nil
}

// redirectComponentLogs sends the global klog output (kube-apiserver,
// scheduler, controller-manager, KWOK) to <data-dir>/logs/control-plane.log so
// the terminal shows kubedeploy's own messages only.
func redirectComponentLogs(dataDir string) (func(), error) {
	closeLogs, err := controlplane.RedirectComponentLogs(filepath.Join(dataDir, "logs", "control-plane.log"), 0)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
	}
	return closeLogs, nil
}
