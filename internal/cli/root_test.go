package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// execute runs cmd with args in this process and returns its error and everything it printed.
func execute(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestUnknownSubcommands: a mistyped subcommand, at the root or in a group, of kubedeploy or of the kubectl
// plugin, is an error naming it with cobra's suggestion on one line, and nothing else is printed (issue 33).
func TestUnknownSubcommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		root func() *cobra.Command
		args []string
		want string
	}{
		{"rollout", NewRootCommand, []string{"rollout", "wacth", "deploy/x"}, `unknown command "wacth" for "kubedeploy rollout"; did you mean "watch"?`},
		{"root", NewRootCommand, []string{"rolout"}, `unknown command "rolout" for "kubedeploy"; did you mean "rollout"?`},
		{"help topic", NewRootCommand, []string{"help", "rollout", "plam"}, `unknown command "plam" for "kubedeploy rollout"; did you mean "plan"?`},
		{"plugin rollout", NewPluginCommand, []string{"rollout", "wacth"}, `unknown command "wacth" for "kubectl kubedeploy rollout"; did you mean "watch"?`},
		{"plugin root", NewPluginCommand, []string{"rollot"}, `unknown command "rollot" for "kubectl kubedeploy"; did you mean "rollout"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := execute(t, tc.root(), tc.args...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q besides the error", out)
			}
		})
	}
}

// writeKubeconfig writes dir/kubeconfig for a cluster at server and returns its path.
func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	content := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: x}}]\ncurrent-context: c\n"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRolloutKubeconfig: `kubedeploy rollout` reads the cluster named by --data-dir, KUBECONFIG and
// KUBEDEPLOY_DATA_DIR, as `kubedeploy kubectl` does, and without a kubeconfig says in one line where it looked
// and how to point elsewhere (issue 33). The clusters are unreachable ports of 127.0.0.1: the error of a plan
// shows which was read.
func TestRolloutKubeconfig(t *testing.T) {
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists on this machine: the rollout commands would read it", clientcmd.RecommendedHomeFile)
	}
	missingDir := filepath.Join(t.TempDir(), "nothing")
	flagDir, envDir := t.TempDir(), t.TempDir()
	writeKubeconfig(t, flagDir, "https://127.0.0.1:1")
	envKubeconfig := writeKubeconfig(t, envDir, "https://127.0.0.1:2")
	for _, tc := range []struct {
		name                      string
		kubeconfigEnv, dataDirEnv string
		args                      []string
		want                      string
	}{
		{"KUBEDEPLOY_DATA_DIR missing", "", missingDir, []string{"watch", "deploy/x"},
			"no kubeconfig at " + missingDir + "/kubeconfig (data dir from KUBEDEPLOY_DATA_DIR " + missingDir + "): start the cluster with `kubedeploy up --data-dir " + missingDir + "`"},
		{"--data-dir missing", "", envDir, []string{"plan", "--data-dir", missingDir, "deploy/x"},
			"no kubeconfig at " + missingDir + "/kubeconfig (data dir from --data-dir " + missingDir + ")"},
		{"KUBECONFIG missing", missingDir, envDir, []string{"plan", "deploy/x"}, "no kubeconfig at " + missingDir + " (from KUBECONFIG)"},
		{"--data-dir", envKubeconfig, "", []string{"plan", "--data-dir", flagDir, "deploy/x"}, "127.0.0.1:1"},
		{"KUBECONFIG", envKubeconfig, missingDir, []string{"plan", "deploy/x"}, "127.0.0.1:2"},
		{"KUBEDEPLOY_DATA_DIR", "", envDir, []string{"plan", "deploy/x"}, "127.0.0.1:2"},
		{"--kubeconfig before --data-dir", "", "", []string{"plan", "--kubeconfig", envKubeconfig, "--data-dir", flagDir, "deploy/x"}, "127.0.0.1:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfigEnv)
			t.Setenv(dataDirEnv, tc.dataDirEnv)
			_, err := execute(t, NewRootCommand(), append([]string{"rollout"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

// TestUseKubeconfigFallsBackToKubectlHome: with the default data dir's kubeconfig missing, the rollout commands
// read ~/.kube/config when it exists, as before; a --data-dir or KUBECONFIG that names nothing does not fall back.
func TestUseKubeconfigFallsBackToKubectlHome(t *testing.T) {
	home := writeKubeconfig(t, t.TempDir(), "https://127.0.0.1:3")
	missing := filepath.Join(t.TempDir(), "nothing")
	for _, tc := range []struct {
		src     kubeconfigSource
		wantErr bool
	}{
		{kubeconfigFrom("", false, "", "", missing), false},
		{kubeconfigFrom("", false, "", missing, "/root"), false},
		{kubeconfigFrom(missing, true, "", "", "/root"), true},
		{kubeconfigFrom("", false, missing, "", "/root"), true},
	} {
		cmd := newRolloutCommand()
		if _, err := useKubeconfig(cmd.PersistentFlags(), tc.src, home); (err != nil) != tc.wantErr {
			t.Errorf("%+v: error %v, want one: %v", tc.src, err, tc.wantErr)
		}
	}
}
