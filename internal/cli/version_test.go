package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

// commandPaths returns the arguments that reach every command of the tree root builds whose flags cobra parses
// (kubectl's are kubectl's), root itself first: [] , [up], [rollout plan], ….
func commandPaths(root *cobra.Command) [][]string {
	var paths [][]string
	var visit func(c *cobra.Command, path []string)
	visit = func(c *cobra.Command, path []string) {
		if c.DisableFlagParsing {
			return
		}
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			visit(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	visit(root, nil)
	return paths
}

// errRan is what a command returns in TestVersionFlagOnEveryCommand when it runs instead of printing the version.
var errRan = errors.New("the command ran")

// findAndStub returns root's command at path, with its Run replaced by one that returns errRan, so that a
// command --version does not stop (up, controllers) fails the test instead of starting.
func findAndStub(t *testing.T, root *cobra.Command, path []string) {
	t.Helper()
	c, rest, err := root.Find(path)
	if err != nil || len(rest) > 0 {
		t.Fatalf("finding %v: %v (left %v)", path, err, rest)
	}
	c.Run, c.RunE = nil, func(*cobra.Command, []string) error { return errRan }
}

// TestVersionFlagOnEveryCommand: --version prints the version report and nothing else, and --version=raw the
// build information, on every command of kubedeploy and of the kubectl plugin that takes flags, before any
// argument check or hook (issue 44: the root printed its help, and up and controllers started). kubectl is left
// out: its arguments are kubectl's (cmd/kubedeploy's TestKubectlArgumentsAreKubectls).
func TestVersionFlagOnEveryCommand(t *testing.T) {
	t.Setenv(dataDirEnv, t.TempDir()) // no kubeconfig: a rollout hook that ran would fail
	t.Setenv("KUBECONFIG", "")
	summary := buildinfo.Summary(programName) + "\n"
	for _, tree := range []struct {
		name string
		new  func() *cobra.Command
		want []string // commands the walk must reach, so that it cannot pass empty
	}{
		{"kubedeploy", NewRootCommand, []string{"kubedeploy", "kubedeploy up", "kubedeploy controllers", "kubedeploy observe",
			"kubedeploy rollout plan", "kubedeploy rollout watch", "kubedeploy shards", "kubedeploy version"}},
		{"plugin", NewPluginCommand, []string{"kubectl kubedeploy", "kubectl kubedeploy rollout watch", "kubectl kubedeploy version"}},
	} {
		var seen []string
		for _, path := range commandPaths(tree.new()) {
			name := strings.Join(append([]string{tree.name}, path...), " ")
			for _, tc := range []struct {
				flag, want string
			}{{"--version", summary}, {"--version=raw", "go\t"}, {"--version=true", summary}} {
				t.Run(name+" "+tc.flag, func(t *testing.T) {
					root := tree.new()
					findAndStub(t, root, path)
					out, err := execute(t, root, append(slices.Clone(path), tc.flag)...)
					if err != nil || !strings.HasPrefix(out, tc.want) || (tc.want == summary && out != summary) {
						t.Fatalf("%v %s: error %v, printed %q; want %q", path, tc.flag, err, out, tc.want)
					}
				})
			}
			c, _, _ := tree.new().Find(path)
			seen = append(seen, c.CommandPath())
		}
		for _, want := range tree.want {
			if !slices.Contains(seen, want) {
				t.Errorf("%s: no case for %q; the walk reached %v", tree.name, want, seen)
			}
		}
	}
}

// TestVersionFlagValues: --version=false runs the command; a value other than true, false or raw is refused, and
// a command's own errors come back once --version is not given.
func TestVersionFlagValues(t *testing.T) {
	root := NewRootCommand()
	findAndStub(t, root, []string{"version"})
	if _, err := execute(t, root, "version", "--version=false"); !errors.Is(err, errRan) {
		t.Errorf("--version=false: error %v, want the command to run", err)
	}
	_, err := execute(t, NewRootCommand(), "up", "--version=v1.2.3")
	if err == nil || !strings.Contains(err.Error(), `invalid argument "v1.2.3" for "--version" flag: want true, false or raw`) {
		t.Errorf("--version=v1.2.3: error %v", err)
	}
	_, err = execute(t, NewRootCommand(), "rollout", "watch")
	if err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s), received 0") {
		t.Errorf("rollout watch without --version or a Deployment: error %v, want cobra's", err)
	}
}
