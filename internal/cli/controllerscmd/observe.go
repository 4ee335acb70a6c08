package controllerscmd

import (
	"context"

	"github.com/spf13/cobra"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
)

// observeOptions are the flags of `kubedeploy observe` and `kubedeploy-controllers observe`.
type observeOptions struct {
	kubeconfig string
	manager    manager.Config
	logging    *logsapi.LoggingConfiguration
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

It needs only get, list and watch on deployments, replicasets and pods (deploy/observe has
the ClusterRole), takes no Lease and writes nothing: no events, no status. /healthz, /livez,
/readyz and /metrics are served over plain HTTP on --bind-address:--port, unauthenticated,
as exporters such as kube-state-metrics serve theirs.`,
		Example: `  kubedeploy observe --kubeconfig ~/.kube/config
  curl -s http://127.0.0.1:10261/metrics | grep kubedeploy_deployment_rollout`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runObserve(cmd.Context(), &o)
		},
	}
	m := &o.manager
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: KUBECONFIG, else in-cluster config, else ~/.kube/config)")
	f.Float32Var(&m.QPS, "kube-api-qps", 20, "requests per second to the API server (lists and watches)")
	f.IntVar(&m.Burst, "kube-api-burst", 30, "burst of requests to the API server")
	f.IntVar(&m.Serving.Port, "port", manager.DefaultObservePort, "plain-HTTP port for /healthz, /readyz, /livez and /metrics (0 disables)")
	f.StringVar(&m.Serving.BindAddress, "bind-address", "127.0.0.1", "IP address for --port (0.0.0.0 for all interfaces, e.g. in a pod)")
	logsapi.AddFlags(o.logging, f)
	return cmd
}

func runObserve(ctx context.Context, o *observeOptions) error {
	cfg := o.manager
	cfg.Observe = true
	cfg, err := validated(cfg)
	if err != nil {
		return err
	}
	return runManager(ctx, cfg, o.kubeconfig, o.logging, "Starting kubedeploy observe", "address", cfg.Serving.BindAddress, "port", cfg.Serving.Port)
}
