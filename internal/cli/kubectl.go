package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

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

// kubectlInvocation returns kubectl's arguments and the KUBECONFIG to run it with ("": leave the environment as
// it is) for args (without --data-dir) and the kubeconfig src (from kubeconfigFrom: an explicit --data-dir wins
// over the environment, as on `kubedeploy up`), which is missing or not:
//
//   - args naming a kubeconfig, or a KUBECONFIG that chose src and exists (any of its files): as they are.
//   - src exists: args as typed, and src.path as KUBECONFIG, as if exported. Not a --kubeconfig flag in front:
//     kubectl then sees a mistyped command first and gives its own "unknown command … Did you mean" (issue 44:
//     its plugin lookup refused a flag first with "flags cannot be placed before plugin name"), and plugins
//     (kubectl-NAME on PATH) run with their arguments as given and find the cluster in KUBECONFIG.
//   - src missing (a single KUBECONFIG file included): --kubeconfig=<src.path> after args (before a "--"), so
//     that kubectl fails naming the missing file, which kubectlError explains, rather than trying
//     localhost:8080 (it skips a KUBECONFIG file that does not exist); kubectl config commands write to that
//     file either way.
func kubectlInvocation(args []string, src kubeconfigSource, missing bool) (kubectlArgs []string, kubeconfigEnv string) {
	fromEnv := src.from == fromKubeconfigEnv
	switch {
	case hasKubeconfigFlag(args), fromEnv && (!missing || len(filepath.SplitList(src.path)) != 1):
		return args, ""
	case !missing:
		return args, src.path
	}
	end := slices.Index(args, "--")
	if end < 0 {
		end = len(args)
	}
	return slices.Concat(args[:end], []string{"--kubeconfig=" + src.path}, args[end:]), ""
}

func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [--data-dir DIR] [kubectl arguments]",
		Short: "Run kubectl against the cluster of `kubedeploy up`",
		Long: `Runs the real kubectl (k8s.io/kubectl) with the given arguments, against
<data-dir>/kubeconfig: --data-dir as given to ` + "`kubedeploy up`" + `, else $KUBEDEPLOY_DATA_DIR,
else ~/.kubedeploy. KUBECONFIG or --kubeconfig take precedence over the default
data dir (not over an explicit --data-dir). Errors are printed by kubectl, as
kubectl prints them, but for a missing kubeconfig, which kubedeploy explains
on one line: where it looked and how to point elsewhere. The kubeconfig is passed
as KUBECONFIG, so plugins (kubectl-NAME on PATH) find it too. Every argument,
--version included, is kubectl's: "kubedeploy kubectl version --client" prints
kubectl's version, "kubedeploy version" kubedeploy's.`,
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
			src := currentKubeconfig(dir, given)
			if !hasKubeconfigFlag(rest) {
				cmdutil.BehaviorOnFatal(kubectlFatal(src))
			}
			kargs, env := kubectlInvocation(rest, src, src.missing())
			if env != "" {
				if err := os.Setenv("KUBECONFIG", env); err != nil {
					return err
				}
			}
			// Packages of the embedded control plane register component-base's --version on
			// pflag.CommandLine, which cobra would add to kubectl's flags: kubectl has no such flag.
			pflag.CommandLine = pflag.NewFlagSet("kubectl", pflag.ExitOnError)
			full := append([]string{"kubectl"}, kargs...)
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

// kubectlFatal returns kubectl's fatal-error handler (cmdutil.BehaviorOnFatal) for `kubedeploy kubectl` reading
// the kubeconfig from src: it prints kubectlError's message on stderr and exits with its code, as kubectl's own
// handler does.
func kubectlFatal(src kubeconfigSource) func(msg string, code int) {
	return func(msg string, code int) {
		msg, code = kubectlError(msg, code, src, src.missing())
		if msg != "" && !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		fmt.Fprint(os.Stderr, msg)
		os.Exit(code)
	}
}

// kubectlError returns what `kubedeploy kubectl` prints for kubectl's fatal error msg, and the exit code:
// kubectl's own message and code, unless the kubeconfig from src is missing (missing) and msg is the failure
// that follows from it (kubectl naming the missing file, or, when every KUBECONFIG file is missing, kubectl
// trying localhost:8080 without one); then src.missingError as main prints errors ("kubedeploy: …") and 1.
// When a data dir's kubeconfig reached a cluster whose certificate its CA did not sign, kubectl's message is
// followed by a line saying so (kubeconfigSource.anotherCluster).
func kubectlError(msg string, code int, src kubeconfigSource, missing bool) (string, int) {
	if !missing {
		if src.dataDir != "" && strings.Contains(msg, "x509: certificate signed by unknown authority") {
			msg = strings.TrimSuffix(msg, "\n") + "\nkubedeploy: " + src.anotherCluster(src.server(nil))
		}
		return msg, code
	}
	follows := strings.Contains(msg, src.path) || (src.from == fromKubeconfigEnv && strings.Contains(msg, "localhost:8080"))
	if !follows {
		return msg, code
	}
	return "kubedeploy: " + src.missingError().Error(), 1
}
