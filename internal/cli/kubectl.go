package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
)

// dataDirEnv names the environment variable that overrides the default data dir
// for commands that have no --data-dir flag of their own (kubectl).
const dataDirEnv = "KUBEDEPLOY_DATA_DIR"

// defaultDataDir returns $KUBEDEPLOY_DATA_DIR, else ~/.kubedeploy.
func defaultDataDir() string {
	if d := os.Getenv(dataDirEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".kubedeploy"
	}
	return filepath.Join(home, ".kubedeploy")
}

// hasKubeconfigFlag reports whether args already choose a kubeconfig.
func hasKubeconfigFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			return true
		}
	}
	return false
}

// kubectlArgs returns the arguments for kubectl: args, with
// --kubeconfig=<data-dir>/kubeconfig added in front unless KUBECONFIG is set
// or args name a kubeconfig already.
func kubectlArgs(args []string, kubeconfigEnv, dataDir string) []string {
	if kubeconfigEnv != "" || hasKubeconfigFlag(args) {
		return args
	}
	return append([]string{"--kubeconfig=" + filepath.Join(dataDir, "kubeconfig")}, args...)
}

func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [kubectl arguments]",
		Short: "Run kubectl against the cluster of `kubedeploy up`",
		Long: `Runs the real kubectl (k8s.io/kubectl) with the given arguments. Unless KUBECONFIG or
--kubeconfig says otherwise it uses <data-dir>/kubeconfig, where <data-dir> is
$KUBEDEPLOY_DATA_DIR or ~/.kubedeploy.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stampKubectlVersion(); err != nil {
				return err
			}
			full := append([]string{"kubectl"}, kubectlArgs(args, os.Getenv("KUBECONFIG"), defaultDataDir())...)
			os.Args = full
			k := kubectlcmd.NewDefaultKubectlCommand()
			k.SetArgs(full[1:])
			return k.ExecuteContext(cmd.Context())
		},
	}
}
