package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

// programName is the name the version report gives this binary, also as the kubectl plugin.
const programName = "kubedeploy"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the kubedeploy version and the Kubernetes release it embeds",
		Long: `Prints kubedeploy's version (stamped with -ldflags -X, else the Go module version or
the VCS revision the go command recorded), the Kubernetes release of the embedded
control plane (what "kubectl version" shows as the server version of "kubedeploy up"),
and the client-go and Go versions it was built with.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Summary(programName))
			return err
		},
	}
}
