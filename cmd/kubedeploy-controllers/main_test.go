package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
)

// forbiddenModules are the modules of the embedded control plane and of kubectl; the controllers-only binary must
// link none of them (issue 9).
var forbiddenModules = []string{"k8s.io/kubernetes", "go.etcd.io/etcd/server", "sigs.k8s.io/kwok", "k8s.io/kubectl"}

// TestDependenciesLeaveOutTheControlPlane lists the packages this binary links (go list -deps) and fails if any
// belongs to a forbidden module. The same check of the all-in-one kubedeploy binary must find each of them, so
// the check itself can fail.
func TestDependenciesLeaveOutTheControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	linked, found := forbiddenDependencies(t, ".")
	for module, pkgs := range found {
		t.Errorf("links %d packages of %s, for example %s (see go mod why -m)", len(pkgs), module, pkgs[0])
	}
	// The listing is the binary's: it holds the controllers (so an empty or wrong listing cannot pass).
	for _, want := range []string{"github.com/kubedeploy/kubedeploy/internal/manager", "github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"} {
		if !slices.Contains(linked, want) {
			t.Errorf("go list -deps does not list %s; got %d packages", want, len(linked))
		}
	}

	_, allInOne := forbiddenDependencies(t, "../kubedeploy")
	for _, module := range forbiddenModules {
		if len(allInOne[module]) == 0 {
			t.Errorf("the check finds no package of %s in cmd/kubedeploy, which links it", module)
		}
	}
}

// forbiddenDependencies returns the packages that the main package in dir links (go list -deps), and those of
// them that belong to each forbidden module, by the entry of forbiddenModules they match.
func forbiddenDependencies(t *testing.T, dir string) (linked []string, forbidden map[string][]string) {
	t.Helper()
	list := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".")
	list.Dir = dir
	out, err := list.Output()
	if err != nil {
		var stderr []byte
		if exitErr, ok := err.(*exec.ExitError); ok {
			stderr = exitErr.Stderr
		}
		t.Fatalf("go list -deps in %s: %v\n%s", dir, err, stderr)
	}
	forbidden = map[string][]string{}
	for line := range strings.Lines(string(out)) {
		pkg, module, _ := strings.Cut(strings.TrimSpace(line), " ")
		linked = append(linked, pkg)
		for _, f := range forbiddenModules {
			if module == f || strings.HasPrefix(module, f+"/") {
				forbidden[f] = append(forbidden[f], pkg)
			}
		}
	}
	return linked, forbidden
}

// TestFlagsAreThoseOfKubedeployControllers: the binary has exactly the flags of `kubedeploy controllers`, plus
// --version.
func TestFlagsAreThoseOfKubedeployControllers(t *testing.T) {
	names := func(fs *pflag.FlagSet) []string {
		var out []string
		fs.VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
		slices.Sort(out)
		return out
	}
	cmd := newCommand()
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	shared := controllerscmd.NewCommand()
	shared.InitDefaultHelpFlag()
	want := append(names(shared.Flags()), "version")
	slices.Sort(want)
	if got := names(cmd.Flags()); !slices.Equal(got, want) {
		t.Errorf("flags %v, want those of `kubedeploy controllers` and version: %v", got, want)
	}
	if f := cmd.Flags().Lookup("version"); f.Shorthand != "" {
		t.Errorf("--version has shorthand -%s; -v is the log verbosity", f.Shorthand)
	}
}

// TestVersionFlag: --version prints the version report, and --version=raw the build information, on the binary
// and on observe, without running either (issue 44: observe had no --version).
func TestVersionFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, buildinfo.Summary(name) + "\n"},
		{[]string{"observe", "--version"}, buildinfo.Summary(name) + "\n"},
		{[]string{"--version=raw"}, "go\t"},
		{[]string{"observe", "--once", "--version=raw"}, "go\t"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := newCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("error %v; printed %q", err, out.String())
			}
			if !strings.HasPrefix(out.String(), tc.want) || (!strings.HasSuffix(tc.want, "\t") && out.String() != tc.want) {
				t.Errorf("printed %q, want %q", out.String(), tc.want)
			}
		})
	}
	if want := name + " " + buildinfo.Version() + " ("; !strings.HasPrefix(buildinfo.Summary(name), want) {
		t.Errorf("the report %q does not start with %q", buildinfo.Summary(name), want)
	}
}

// TestStampedVersion builds the binary with its version stamped through buildinfo.VersionVariable and runs
// --version, as a release build and the image would.
func TestStampedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-ldflags", "-X "+buildinfo.VersionVariable+"=v9.8.7", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), name+" v9.8.7 (") {
		t.Errorf("%s --version: %v, printed %q; want %q", name, err, out, name+" v9.8.7 (…)")
	}
}

// TestUnknownSubcommand: a mistyped subcommand is an error with cobra's suggestion, on one line, not the help.
func TestUnknownSubcommand(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"obsrve"})
	err := cmd.Execute()
	want := `unknown command "obsrve" for "kubedeploy-controllers"; did you mean "observe"?`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if out.Len() > 0 {
		t.Errorf("printed %q besides the error", out.String())
	}
}
