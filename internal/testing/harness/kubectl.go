package harness

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// kubectlMu serialises Kubectl: kubectl's fatal-error handler (cmdutil.BehaviorOnFatal) is process-wide.
var kubectlMu sync.Mutex

// Kubectl runs the real kubectl (k8s.io/kubectl/pkg/cmd, the code of the kubectl binary and of `kubedeploy
// kubectl`) in this process with args against e's cluster (its admin kubeconfig), and returns what it printed
// on stdout. An error carries kubectl's exit code and its stderr, e.g. `kubectl rollout undo …: exit 1:
// error: …`. Calls are serialised.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	kubectlMu.Lock()
	defer kubectlMu.Unlock()
	var out, errOut bytes.Buffer
	full := append([]string{"--kubeconfig=" + e.ControlPlane.KubeconfigPath()}, args...)
	cmd := kubectlcmd.NewKubectlCommand(kubectlcmd.KubectlOptions{
		Arguments:   append([]string{"kubectl"}, full...),
		ConfigFlags: genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithDiscoveryBurst(300).WithDiscoveryQPS(50.0),
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
	})
	cmd.SetArgs(full)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	fatal := 0
	cmdutil.BehaviorOnFatal(func(msg string, code int) {
		fatal = code
		errOut.WriteString(msg)
		panic(kubectlFatal{})
	})
	defer cmdutil.DefaultBehaviorOnFatal()
	err := runRecovering(func() error {
		err := cmd.ExecuteContext(ctx)
		cmdutil.CheckErr(err)
		return err
	})
	if err != nil || fatal != 0 {
		return out.String(), fmt.Errorf("kubectl %s: exit %d: %s", strings.Join(args, " "), max(fatal, 1), strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// kubectlFatal is the panic value Kubectl's fatal handler unwinds with instead of kubectl's os.Exit.
type kubectlFatal struct{}

func runRecovering(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(kubectlFatal); !ok {
				panic(r)
			}
			err = fmt.Errorf("kubectl exited")
		}
	}()
	return f()
}
