package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/cobra"
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
