package cliargs

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// tree returns a root with a group ("rollout": plan, watch) that cannot run, a leaf that takes no arguments, and
// ran, which records the command that ran.
func tree(ran *string) *cobra.Command {
	leaf := func(name string) *cobra.Command {
		return &cobra.Command{Use: name, Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
			*ran = c.CommandPath()
			return nil
		}}
	}
	root := &cobra.Command{Use: "kubedeploy", SilenceErrors: true, SilenceUsage: true}
	group := &cobra.Command{Use: "rollout", Short: "Plan and follow rollouts"}
	group.AddCommand(leaf("plan"), leaf("watch"))
	root.AddCommand(group, leaf("version"))
	RefuseUnknownSubcommands(root)
	return root
}

func TestRefuseUnknownSubcommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		wantRan string
		help    bool
	}{
		{name: "typo in a group", args: []string{"rollout", "wacth"}, wantErr: `unknown command "wacth" for "kubedeploy rollout"; did you mean "watch"?`},
		{name: "typo at the root", args: []string{"verison"}, wantErr: `unknown command "verison" for "kubedeploy"; did you mean "version"?`},
		{name: "no suggestion", args: []string{"rollout", "frobnicate"}, wantErr: `unknown command "frobnicate" for "kubedeploy rollout"`},
		{name: "prefix suggests", args: []string{"rollout", "w"}, wantErr: `unknown command "w" for "kubedeploy rollout"; did you mean "watch"?`},
		{name: "completion group", args: []string{"completion", "bassh"}, wantErr: `unknown command "bassh" for "kubedeploy completion"; did you mean "bash"?`},
		{name: "several suggestions", args: []string{"completion", "bsh"}, wantErr: `unknown command "bsh" for "kubedeploy completion"; did you mean "bash" or "fish" or "zsh"?`},
		{name: "help on an unknown topic", args: []string{"help", "rollout", "wacth"}, wantErr: `unknown command "wacth" for "kubedeploy rollout"; did you mean "watch"?`},
		{name: "known subcommand runs", args: []string{"rollout", "watch"}, wantRan: "kubedeploy rollout watch"},
		{name: "group alone prints its help", args: []string{"rollout"}, help: true},
		{name: "root alone prints its help", args: nil, help: true},
		{name: "help on a known topic", args: []string{"help", "rollout"}, help: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran string
			root := tree(&ran)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tc.args)
			err := root.Execute()
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if out.Len() > 0 {
					t.Errorf("printed %q besides the error", out.String())
				}
			case err != nil:
				t.Fatalf("error %v", err)
			case tc.wantRan != ran:
				t.Errorf("ran %q, want %q", ran, tc.wantRan)
			case tc.help && !strings.Contains(out.String(), "Usage:"):
				t.Errorf("printed %q, want the help", out.String())
			}
		})
	}
}

// A group that runs keeps accepting what its Args accept; what they refuse is an unknown subcommand.
func TestRunnableGroupKeepsItsArgs(t *testing.T) {
	var got []string
	root := &cobra.Command{Use: "kubedeploy-controllers", SilenceErrors: true, SilenceUsage: true, Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { got = args; return nil }}
	root.AddCommand(&cobra.Command{Use: "observe", Run: func(*cobra.Command, []string) {}})
	RefuseUnknownSubcommands(root)
	root.SetArgs([]string{"x"})
	if err := root.Execute(); err != nil || len(got) != 1 {
		t.Fatalf("one argument: error %v, ran with %v", err, got)
	}
	root.SetArgs([]string{"obsrve", "y"})
	want := `unknown command "obsrve" for "kubedeploy-controllers"; did you mean "observe"?`
	if err := root.Execute(); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{InRange("--zones", 0, 1, 26), "--zones must be in 1..26, got 0"},
		{InRange("--zones", 26, 1, 26), ""},
		{InRange("--api-port", 65536, 0, 65535), "--api-port must be in 0..65535, got 65536"},
		{AtLeast("--concurrent-deployment-syncs", 0, 1), "--concurrent-deployment-syncs must be at least 1, got 0"},
		{AtLeast("-v", 0, 0), ""},
		{AtLeast("--pod-termination-delay", -time.Second, 0), "--pod-termination-delay must be at least 0s, got -1s"},
		{Positive("--kube-api-qps", float32(0)), "--kube-api-qps must be greater than 0, got 0"},
		{Positive("--kube-api-qps", float32(0.5)), ""},
		{Positive("--kube-api-qps", float32(math.NaN())), "--kube-api-qps must be greater than 0, got NaN"},
		{InRange("--x", math.NaN(), 0, 1), "--x must be in 0..1, got NaN"},
		{AtLeast("--x", math.NaN(), 0), "--x must be at least 0, got NaN"},
		{Positive("--shadow-quiet", -5*time.Second), "--shadow-quiet must be greater than 0, got -5s"},
		{First(nil, InRange("--nodes", 0, 1, 1000), AtLeast("-v", -1, 0)), "--nodes must be in 1..1000, got 0"},
		{First(nil, nil), ""},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
