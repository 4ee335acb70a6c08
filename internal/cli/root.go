package cli

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
)

// NewRootCommand returns the `kubedeploy` command with every subcommand.
// Errors are returned to main, which prints them on one line and exits 1;
// an unknown subcommand, at any level, is one (cliargs.RefuseUnknownSubcommands).
// Every command but kubectl (whose arguments are kubectl's) takes --version
// (cliargs.AddVersionFlag): it prints what `kubedeploy version` prints.
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
		newRolloutCommand(), newShardsCommand(), newVersionCommand())
	cliargs.RefuseUnknownSubcommands(root)
	cliargs.AddVersionFlag(root, buildinfo.Summary(programName))
	return root
}

// newRolloutCommand returns `kubedeploy rollout` (package rollout) reading
// the cluster of `kubedeploy up`: the kubeconfig is --kubeconfig, else
// <--data-dir>/kubeconfig, else $KUBECONFIG, else <data dir>/kubeconfig
// ($KUBEDEPLOY_DATA_DIR, else ~/.kubedeploy) when it exists, else
// ~/.kube/config, as `kubedeploy kubectl` reads it (but for ~/.kube/config).
// When none exists, a subcommand that reads the cluster fails before it
// runs with kubeconfigSource.missingError.
func newRolloutCommand() *cobra.Command {
	cmd := rollout.NewCommand(rollout.Options{DefaultKubeconfig: filepath.Join(defaultDataDir(), "kubeconfig")})
	var dataDir string
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", "the `DIR` given to kubedeploy up, whose cluster to read (default $"+dataDirEnv+", else ~/.kubedeploy); before KUBECONFIG, after --kubeconfig")
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if c == cmd {
			return nil // `rollout` alone prints its help
		}
		given := c.Flags().Changed("data-dir")
		if given && dataDir == "" {
			return errors.New("--data-dir needs a directory")
		}
		return useKubeconfig(c.Flags(), currentKubeconfig(dataDir, given), clientcmd.RecommendedHomeFile)
	}
	return cmd
}

// useKubeconfig points the rollout command's flags at src's kubeconfig when --data-dir chose it, and returns
// src.missingError when the command would read a cluster and finds no kubeconfig: none given by --kubeconfig or
// --server, src's missing, and, when the data dir is only the default one, kubectlHome (~/.kube/config, the
// rollout commands' last resort) missing too. A plan with --local reads no cluster.
func useKubeconfig(flags *pflag.FlagSet, src kubeconfigSource, kubectlHome string) error {
	if flags.Changed("kubeconfig") || flags.Changed("server") {
		return nil
	}
	if local, err := flags.GetBool("local"); err == nil && local {
		return nil
	}
	if src.from == fromDataDirFlag {
		if err := flags.Set("kubeconfig", src.path); err != nil {
			return err
		}
	}
	if !src.missing() {
		return nil
	}
	usesHome := src.from == fromDefault || src.from == fromDataDirEnv // what KUBECONFIG or a flag names replaces it
	if _, err := os.Stat(kubectlHome); err == nil && usesHome {
		return nil
	}
	return src.missingError()
}

// PluginName is the file name under which the kubedeploy binary is a
// kubectl plugin: `kubectl kubedeploy rollout ...` runs it with the
// arguments after "kubedeploy".
const PluginName = "kubectl-kubedeploy"

// NewPluginCommand returns the command tree kubectl-kubedeploy runs: the
// rollout commands, with kubectl's own kubeconfig rules (--kubeconfig,
// $KUBECONFIG, ~/.kube/config), and version. An unknown subcommand is an
// error, and --version works on every command, as in NewRootCommand.
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
	cliargs.AddVersionFlag(root, buildinfo.Summary(programName))
	return root
}
