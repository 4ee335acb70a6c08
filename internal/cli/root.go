package cli

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
)

// NewRootCommand returns the `kubedeploy` command with every subcommand.
// Errors are returned to main, which prints them on one line and exits 1;
// an unknown subcommand, at any level, is one (cliargs.RefuseUnknownSubcommands).
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubedeploy",
		Short: "The Kubernetes Deployment and ReplicaSet controllers, with a local control plane to run them on",
		Long: `kubedeploy runs its own implementation of the Kubernetes Deployment and ReplicaSet
controllers. "kubedeploy up" starts a complete local control plane (etcd, kube-apiserver,
scheduler, generic controllers, simulated nodes and pods) with those controllers in one
process; "kubedeploy kubectl" is kubectl, pointed at it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUpCommand(), controllerscmd.NewCommand(), controllerscmd.NewObserveCommand(), newKubectlCommand(),
		rollout.NewCommand(rollout.Options{DefaultKubeconfig: filepath.Join(defaultDataDir(), "kubeconfig")}),
		newVersionCommand())
	cliargs.RefuseUnknownSubcommands(root)
	return root
}

// PluginName is the file name under which the kubedeploy binary is a
// kubectl plugin: `kubectl kubedeploy rollout ...` runs it with the
// arguments after "kubedeploy".
const PluginName = "kubectl-kubedeploy"

// NewPluginCommand returns the command tree kubectl-kubedeploy runs: the
// rollout commands, with kubectl's own kubeconfig rules (--kubeconfig,
// $KUBECONFIG, ~/.kube/config), and version. An unknown subcommand is an
// error, as in NewRootCommand.
func NewPluginCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubedeploy",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kubedeploy"},
		Short:         "kubedeploy's rollout commands as a kubectl plugin",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(rollout.NewCommand(rollout.Options{}), newVersionCommand())
	cliargs.RefuseUnknownSubcommands(root)
	return root
}
