// Command kubedeploy-controllers runs only kubedeploy's Deployment and ReplicaSet controllers against an existing
// cluster: the binary to run in a cluster (deploy/). It is `kubedeploy controllers` with exactly its flags, plus
// --version, built without the embedded control plane (etcd, kube-apiserver, scheduler, KWOK) and kubectl that
// the all-in-one kubedeploy binary links.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
)

const name = "kubedeploy-controllers"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so a second
		// signal ends the process at once.
		<-ctx.Done()
		stop()
	}()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, cliargs.OneLine(err))
		os.Exit(1)
	}
}

// newCommand returns `kubedeploy controllers` (controllerscmd.NewCommand) as the root command of this binary, with
// --version printing buildinfo.Summary (and --version=raw the build information) here and on observe
// (cliargs.AddVersionFlag). Errors are returned to main, which prints them on one line and exits 1; an unknown
// subcommand is one (cliargs.RefuseUnknownSubcommands).
func newCommand() *cobra.Command {
	cmd := controllerscmd.NewCommand()
	cmd.Use = name
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	// Observe mode (issue 25), for clusters whose own controllers run the rollouts: `kubedeploy-controllers observe`.
	observe := controllerscmd.NewObserveCommand()
	observe.SilenceUsage = true
	cmd.AddCommand(observe)
	cliargs.RefuseUnknownSubcommands(cmd)
	cliargs.AddVersionFlag(cmd, buildinfo.Summary(name))
	return cmd
}
