package controllerscmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shadow"
)

// observeOptions are the flags of `kubedeploy observe` and `kubedeploy-controllers observe`.
type observeOptions struct {
	kubeconfig string
	manager    manager.Config
	memory     memoryOptions
	logging    *logsapi.LoggingConfiguration
	// once and namespace are --once and --namespace: print the shadow check's report and exit.
	once      bool
	namespace string
}

// NewObserveCommand returns the `observe` command (issue 25): observe mode of internal/manager, which follows
// every Deployment's rollouts with the controllers' informers and serves their metrics, writing nothing to the
// cluster. `kubedeploy observe` and `kubedeploy-controllers observe` are both this command.
func NewObserveCommand() *cobra.Command {
	o := observeOptions{logging: logsapi.NewLoggingConfiguration()}
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Export rollout metrics of any cluster, managed ones included, writing nothing to it",
		Long: `Follows every Deployment of the cluster from --kubeconfig (else KUBECONFIG, else the
in-cluster configuration, else ~/.kube/config), whichever controllers run its rollouts, and
serves what kubedeploy's controllers export about them: rollouts ended by outcome and their
durations, for each rollout in progress its age and how long it waited on what (scheduling,
image pulls, startup and readiness, minReadySeconds, termination, a pause, a partition) with
the reason, and the Deployments' unavailable pods by reason.

It also runs kubedeploy's own Deployment and ReplicaSet controllers in shadow: whenever a
Deployment settles (complete, paused, held or past its deadline, every status caught up), their
sync runs on what the cluster shows, through a client that records writes and sends none. The
live controller has nothing left to do there, so every write kubedeploy would make is a
divergence: counted in kubedeploy_shadow_divergences_total{kind} and logged once, with the object,
the field, the live value and kubedeploy's. While rollouts run, each ReplicaSet write of the live
controller is checked against the rolling-update bounds (maxSurge, maxUnavailable, and
kubedeploy.io/rollout-partition, which upstream ignores): kubedeploy_shadow_bound_violations_total.
With --once it checks every Deployment (of --namespace) once, prints the writes kubedeploy would
make if you switched to it now (expected: none) and exits, 1 if there are any.

It needs only get, list and watch on deployments, replicasets and pods (deploy/observe has
the ClusterRole), takes no Lease and writes nothing: no events, no status. /healthz, /livez,
/readyz and /metrics are served over plain HTTP on --bind-address:--port, unauthenticated,
as exporters such as kube-state-metrics serve theirs.`,
		Example: `  kubedeploy observe --kubeconfig ~/.kube/config
  curl -s http://127.0.0.1:10261/metrics | grep kubedeploy_deployment_rollout
  kubedeploy observe --once -n shop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if o.once {
				return runObserveOnce(cmd.Context(), &o, cmd.OutOrStdout())
			}
			if o.namespace != "" {
				return errors.New("--namespace goes with --once; observe mode follows every namespace")
			}
			return runObserve(cmd.Context(), &o)
		},
	}
	m := &o.manager
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: KUBECONFIG, else in-cluster config, else ~/.kube/config)")
	f.Float32Var(&m.QPS, "kube-api-qps", 20, "requests per second to the API server (lists and watches)")
	f.IntVar(&m.Burst, "kube-api-burst", 30, "burst of requests to the API server")
	f.IntVar(&m.Serving.Port, "port", manager.DefaultObservePort, "plain-HTTP port for /healthz, /readyz, /livez and /metrics, 0..65535 (0 disables)")
	f.StringVar(&m.Serving.BindAddress, "bind-address", "127.0.0.1", "IP address for --port (0.0.0.0 for all interfaces, e.g. in a pod)")
	f.DurationVar(&m.ShadowQuiet, "shadow-quiet", shadow.DefaultQuiet, "how long a Deployment kubedeploy would write to must stay unchanged before the shadow check reports it (> 0)")
	f.BoolVar(&o.once, "once", false, "check every Deployment once, print the writes kubedeploy would make, and exit (1 if any)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "with --once: the namespace to check (default: all)")
	addMemoryFlags(f, &o.memory)
	logsapi.AddFlags(o.logging, f)
	return cmd
}

// check returns the first numeric flag of `observe` outside its range, naming the flag and the range. A zero
// --shadow-quiet is refused: the shadow check reads it as its default, 5s.
func (o *observeOptions) check() error {
	m := &o.manager
	return cliargs.First(
		checkClientFlags(m.QPS, m.Burst),
		cliargs.InRange("--port", m.Serving.Port, 0, 65535),
		cliargs.Positive("--shadow-quiet", m.ShadowQuiet),
		o.memory.check(),
		checkLoggingFlags(o.logging),
	)
}

// errDivergent is --once's error when kubedeploy would write: the exit status says so to scripts.
var errDivergent = errors.New("kubedeploy would make writes the live controller does not (listed above)")

func runObserveOnce(ctx context.Context, o *observeOptions, out io.Writer) error {
	cfg := o.manager
	cfg.Observe = true
	cfg, err := validated(cfg)
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(o.logging, nil); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	defer klog.Flush()
	if cfg.RESTConfig, err = loadRESTConfig(o.kubeconfig); err != nil {
		return err
	}
	if err := checkReachable(ctx, cfg.RESTConfig); err != nil {
		return err
	}
	r, err := manager.ObserveOnce(klog.NewContext(ctx, klog.Background().WithName("kubedeploy")), cfg, o.namespace)
	if err != nil {
		return err
	}
	printOnce(out, r, o.namespace)
	if len(r.Divergent) > 0 {
		return errDivergent
	}
	return nil
}

// checkReachable returns an error naming the API server of cfg when a GET of its /version fails (nothing
// answers, a certificate of another CA, …): --once's informers would retry forever and never sync.
func checkReachable(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("reading the cluster at %s: %w", cfg.Host, err)
	}
	return nil
}

// printOnce prints --once's report: what was checked, each divergent Deployment with its divergences, and the
// Deployments not settled (not checked).
func printOnce(out io.Writer, r manager.OnceReport, namespace string) {
	where := "the cluster"
	if namespace != "" {
		where = "namespace " + namespace
	}
	fmt.Fprintf(out, "Shadow check of %s: %d Deployments, %d settled, %d would get writes from kubedeploy.\n",
		where, r.Checked, r.Checked-len(r.Unsettled), len(r.Divergent))
	if len(r.Divergent) > 0 {
		fmt.Fprintln(out, "\nIf you switched to kubedeploy now, these are the writes it would make:")
	}
	for _, d := range r.Divergent {
		fmt.Fprintf(out, "  Deployment %s\n", d.Deployment)
		for _, dv := range d.Divergences {
			fmt.Fprintf(out, "    %s\n", dv)
		}
	}
	if len(r.Unsettled) > 0 {
		fmt.Fprintln(out, "\nNot settled (rollouts in progress), so not checked:")
		for _, u := range r.Unsettled {
			fmt.Fprintf(out, "  %s\n", u)
		}
	}
	if len(r.Rollouts) > 0 {
		fmt.Fprintln(out, "\nRollouts not complete (the verdict kubedeploy's conditions, rollout plan and rollout watch give):")
		for _, v := range r.Rollouts {
			fmt.Fprintf(out, "  %s\n", v)
		}
	}
}

func runObserve(ctx context.Context, o *observeOptions) error {
	cfg := o.manager
	cfg.Observe = true
	cfg, err := validated(cfg)
	if err != nil {
		return err
	}
	return runManager(ctx, cfg, o.kubeconfig, &o.memory, o.logging, "Starting kubedeploy observe", "address", cfg.Serving.BindAddress, "port", cfg.Serving.Port)
}
