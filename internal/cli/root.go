package cli

import (
	"github.com/spf13/cobra"

	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
)

// NewRootCommand returns the `kubedeploy` command with every subcommand.
// Errors are returned to main, which prints them on one line and exits 1.
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
	root.AddCommand(newUpCommand(), controllerscmd.NewCommand(), newKubectlCommand(), newVersionCommand())
	return root
}
