// Package rollout is `kubedeploy rollout`: commands that show a Deployment
// rollout before and while it happens (issue 11). The same commands run as
// a kubectl plugin when the binary is installed as kubectl-kubedeploy.
//
// It holds the commands and their input and output: `plan` reads the
// state to plan from (the cluster, or -f manifests through cli-runtime's
// resource builder) and prints internal/simulator's Plan; `watch` runs a
// watcher (package watcher), turns what it holds into a view model (package
// viewmodel) on every change and draws it as plain lines or a terminal view,
// and with --timeline feeds a timeline.Recorder. What a rollout's state is
// comes from rolloutstate through those packages; nothing here judges it.
// plan and watch read the cluster and never write to it (plan's dry run
// included); promote and abort (EX-5) write one annotation each, which the
// Deployment controller carries out.
package rollout

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
)

// Options says how the rollout commands find their cluster.
type Options struct {
	// DefaultKubeconfig, when not empty, is the kubeconfig used unless
	// --kubeconfig or $KUBECONFIG name one: `kubedeploy rollout` passes
	// the one of `kubedeploy up` (<data-dir>/kubeconfig); as a kubectl
	// plugin it is empty, so kubectl's usual rules apply.
	DefaultKubeconfig string
}

// NewCommand returns `rollout` and its subcommands. Errors are returned to
// the caller, which prints them on one line and exits 1.
func NewCommand(o Options) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Plan, follow, promote and abort Deployment rollouts",
		Long: `Commands that show what a Deployment rollout will do and what it is doing, computed
by kubedeploy's own controllers' code (the rollout-state package and both controllers' syncs),
and that move a rollout with steps (kubedeploy.io/rollout-steps) on or back. plan and watch
read the cluster and never write to it; promote and abort write one annotation each, which
the Deployment controller carries out.`,
		// The caller prints a returned error once; usage is for mistakes in
		// arguments, which cobra reports itself.
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(cmd.PersistentFlags())
	c := &clusterFlags{flags: flags, defaultKubeconfig: o.DefaultKubeconfig}
	cmd.AddCommand(newPlanCommand(c), newWatchCommand(c), newPromoteCommand(c), newAbortCommand(c))
	return cmd
}

// clusterFlags are kubectl's cluster flags (--kubeconfig, -n, --context, ...)
// plus the kubedeploy default kubeconfig.
type clusterFlags struct {
	flags             *genericclioptions.ConfigFlags
	defaultKubeconfig string
}

// client returns a clientset and the namespace to use: -n, else the
// kubeconfig context's, else "default". The kubeconfig is --kubeconfig,
// else $KUBECONFIG, else the default one when it exists, else kubectl's.
// A negative --request-timeout is refused: client-go would take it for no timeout at all.
func (c *clusterFlags) client() (kubernetes.Interface, string, error) {
	if err := c.checkRequestTimeout(); err != nil {
		return nil, "", err
	}
	if (c.flags.KubeConfig == nil || *c.flags.KubeConfig == "") && os.Getenv("KUBECONFIG") == "" && c.defaultKubeconfig != "" {
		if _, err := os.Stat(c.defaultKubeconfig); err == nil {
			path := c.defaultKubeconfig
			c.flags.KubeConfig = &path
		}
	}
	// Without any kubeconfig client-go would quietly try localhost:8080.
	if raw, err := c.flags.ToRawKubeConfigLoader().RawConfig(); err == nil && len(raw.Clusters) == 0 &&
		(c.flags.APIServer == nil || *c.flags.APIServer == "") {
		where := "--kubeconfig, $KUBECONFIG or ~/.kube/config"
		if c.defaultKubeconfig != "" {
			where = c.defaultKubeconfig + " (from `kubedeploy up`), " + where
		}
		return nil, "", fmt.Errorf("no cluster to read: no kubeconfig in %s; start one with `kubedeploy up` or pass --kubeconfig", where)
	}
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster to read (start one with `kubedeploy up`, or pass --kubeconfig): %w", err)
	}
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	return client, ns, nil
}

// checkRequestTimeout returns an error for a --request-timeout that parses (clientcmd.ParseTimeout) to a
// negative duration; one that does not parse is left to ToRESTConfig, which says so.
func (c *clusterFlags) checkRequestTimeout() error {
	if c.flags.Timeout == nil || *c.flags.Timeout == "" {
		return nil
	}
	d, err := clientcmd.ParseTimeout(*c.flags.Timeout)
	if err != nil {
		return nil
	}
	return cliargs.AtLeast("--request-timeout", d, 0)
}

// namespace returns -n when given, else "".
func (c *clusterFlags) namespace() string {
	if c.flags.Namespace == nil {
		return ""
	}
	return *c.flags.Namespace
}

// deploymentName parses "deploy/NAME", "deployment/NAME",
// "deployments/NAME", "deployment.apps/NAME" or a bare NAME.
func deploymentName(arg string) (string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "deployment", arg
	}
	switch strings.ToLower(kind) {
	case "deploy", "deployment", "deployments", "deployment.apps", "deployments.apps":
	default:
		return "", fmt.Errorf("%q is not a Deployment: use deploy/NAME", arg)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q: no Deployment name: use deploy/NAME", arg)
	}
	return name, nil
}

// errNoTarget is returned when neither deploy/NAME nor -f names the Deployment.
var errNoTarget = errors.New("name the Deployment: deploy/NAME, or -f with a Deployment manifest")
