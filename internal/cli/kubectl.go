package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
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

// takeDataDir removes a --data-dir flag ("--data-dir DIR" or
// "--data-dir=DIR", before any "--") from args, which kubectl would reject,
// and returns its value, whether it was given, and the other arguments. A
// --data-dir without a value is returned as given with an empty DIR.
func takeDataDir(args []string) (dir string, given bool, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return dir, given, append(rest, args[i:]...)
		case a == "--data-dir":
			given = true
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--data-dir="):
			dir, given = strings.TrimPrefix(a, "--data-dir="), true
		default:
			rest = append(rest, a)
		}
	}
	return dir, given, rest
}

// kubectlArgs returns the arguments for kubectl: args, with
// --kubeconfig=<data-dir>/kubeconfig added in front unless args name a
// kubeconfig already, or KUBECONFIG is set and no --data-dir was given
// (dataDirGiven): an explicit --data-dir wins over the environment, as on
// `kubedeploy up`.
func kubectlArgs(args []string, kubeconfigEnv, dataDir string, dataDirGiven bool) []string {
	if hasKubeconfigFlag(args) || (kubeconfigEnv != "" && !dataDirGiven) {
		return args
	}
	return append([]string{"--kubeconfig=" + filepath.Join(dataDir, "kubeconfig")}, args...)
}

func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [--data-dir DIR] [kubectl arguments]",
		Short: "Run kubectl against the cluster of `kubedeploy up`",
		Long: `Runs the real kubectl (k8s.io/kubectl) with the given arguments, against
<data-dir>/kubeconfig: --data-dir as given to ` + "`kubedeploy up`" + `, else $KUBEDEPLOY_DATA_DIR,
else ~/.kubedeploy. KUBECONFIG or --kubeconfig take precedence over the default
data dir (not over an explicit --data-dir). Errors are printed by kubectl, as
kubectl prints them.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stampKubectlVersion(); err != nil {
				return err
			}
			dir, given, rest := takeDataDir(args)
			if given && dir == "" {
				return errors.New("--data-dir needs a directory")
			}
			if !given {
				dir = defaultDataDir()
			}
			full := append([]string{"kubectl"}, kubectlArgs(rest, os.Getenv("KUBECONFIG"), dir, given)...)
			os.Args = full
			k := kubectlcmd.NewDefaultKubectlCommand()
			k.SetArgs(full[1:])
			// As kubectl's own main: cobra prints nothing, and an error is
			// printed once, kubectl's way, ending the process with its exit code.
			k.SilenceErrors, k.SilenceUsage = true, true
			cmdutil.CheckErr(k.ExecuteContext(cmd.Context()))
			return nil
		},
	}
}
