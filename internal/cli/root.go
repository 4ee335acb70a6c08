package cli

import (
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
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
	root.AddCommand(newUpCommand(), controllerscmd.NewCommand(), newObserveCommand(), newKubectlCommand(),
		newRolloutCommand(), newShardsCommand(), newVersionCommand())
	cliargs.RefuseUnknownSubcommands(root)
	cliargs.AddVersionFlag(root, buildinfo.Summary(programName))
	return root
}

// dataDirUsage is the help of --data-dir on the commands that read the cluster of `kubedeploy up`.
const dataDirUsage = "the `DIR` given to kubedeploy up, whose cluster to read (default $" + dataDirEnv + ", else ~/.kubedeploy); before KUBECONFIG, after --kubeconfig"

// newRolloutCommand returns `kubedeploy rollout` (package rollout) reading
// the cluster of `kubedeploy up` by the rule of useKubeconfig: the kubeconfig is --kubeconfig, else
// <--data-dir>/kubeconfig, else $KUBECONFIG, else <data dir>/kubeconfig
// ($KUBEDEPLOY_DATA_DIR, else ~/.kubedeploy) when it exists, else
// ~/.kube/config, as `kubedeploy kubectl` reads it (but for ~/.kube/config).
// When none exists, a subcommand that reads the cluster fails before it
// runs with kubeconfigSource.missingError; when the data dir's kubeconfig
// reaches no cluster or another one, its error says so (kubeconfigSource.explain).
func newRolloutCommand() *cobra.Command {
	cmd := rollout.NewCommand(rollout.Options{DefaultKubeconfig: filepath.Join(defaultDataDir(), "kubeconfig")})
	var dataDir string
	var chosen kubeconfigSource // the data dir's, once useKubeconfig chose it
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", dataDirUsage)
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if c == cmd {
			return nil // `rollout` alone prints its help
		}
		_, err := chooseKubeconfig(c, dataDir, &chosen)
		return err
	}
	explainErrors(cmd.Commands(), func(err error) error { return chosen.explain(err) })
	return cmd
}

// chooseKubeconfig applies useKubeconfig's rule to c's flags with the --data-dir value dataDir (or
// $KUBEDEPLOY_DATA_DIR, or ~/.kubedeploy), and sets *chosen to the source when its kubeconfig is the one used, so
// that errors can be explained against it (kubeconfigSource.explain). It returns the source considered and
// dataDirSource's or useKubeconfig's error.
func chooseKubeconfig(c *cobra.Command, dataDir string, chosen *kubeconfigSource) (kubeconfigSource, error) {
	src, err := dataDirSource(c.Flags(), dataDir)
	if err != nil {
		return src, err
	}
	used, err := useKubeconfig(c.Flags(), src, clientcmd.RecommendedHomeFile)
	if used {
		*chosen = src
	}
	return src, err
}

// newObserveCommand returns `kubedeploy observe` (controllerscmd.NewObserveCommand) reading, without
// --kubeconfig or KUBECONFIG, the cluster of `kubedeploy up` by the same rule as rollout and shards
// (useKubeconfig, with --data-dir; issue 44), else, in a pod, the in-cluster configuration, else
// ~/.kube/config.
func newObserveCommand() *cobra.Command {
	cmd := controllerscmd.NewObserveCommand()
	cmd.Long += `

Without --kubeconfig or KUBECONFIG, "kubedeploy observe" reads the cluster of "kubedeploy up":
--data-dir's kubeconfig, else $KUBEDEPLOY_DATA_DIR's, else ~/.kubedeploy's when it exists.`
	var dataDir string
	var chosen kubeconfigSource
	cmd.Flags().StringVar(&dataDir, "data-dir", "", dataDirUsage)
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		src, err := chooseKubeconfig(c, dataDir, &chosen)
		if _, inCluster := rest.InClusterConfig(); err != nil && src.from != fromDataDirFlag && inCluster == nil {
			return nil // in a pod: observe's own rule takes the in-cluster configuration
		}
		return err
	}
	explainErrors([]*cobra.Command{cmd}, func(err error) error { return chosen.explain(err) })
	return cmd
}

// explainErrors makes each of cmds return its RunE's error through explain.
func explainErrors(cmds []*cobra.Command, explain func(error) error) {
	for _, c := range cmds {
		run := c.RunE
		if run == nil {
			continue
		}
		c.RunE = func(c *cobra.Command, args []string) error { return explain(run(c, args)) }
	}
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
