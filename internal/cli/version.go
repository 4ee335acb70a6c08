package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is kubedeploy's version, set at build time with
// -ldflags "-X github.com/kubedeploy/kubedeploy/internal/cli.Version=v1.2.3".
var Version = "v0.1.0-dev"

// kubernetesVersion returns the version of k8s.io/client-go this binary was built with.
func kubernetesVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/client-go" {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the kubedeploy version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubedeploy %s (client-go %s, %s, %s/%s)\n",
				Version, kubernetesVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
