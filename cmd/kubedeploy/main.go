// Command kubedeploy runs the kubedeploy Deployment and ReplicaSet controllers,
// either inside an embedded local control plane (`kubedeploy up`) or against a
// real cluster, and bundles kubectl (`kubedeploy kubectl`). In a cluster, run
// cmd/kubedeploy-controllers instead: the same `controllers` command, without
// the embedded control plane and kubectl. Installed (or linked) as
// kubectl-kubedeploy it is a kubectl plugin: `kubectl kubedeploy rollout ...`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kubedeploy/kubedeploy/internal/cli"
	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so a second
		// Ctrl-C ends the process at once.
		<-ctx.Done()
		stop()
	}()
	root := cli.NewRootCommand()
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == cli.PluginName {
		root = cli.NewPluginCommand()
	}
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "kubedeploy: %s\n", cliargs.OneLine(err))
		os.Exit(cliargs.ExitCode(err))
	}
}
