package buildinfo

import (
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(main string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kubedeploy/kubedeploy", Version: main}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const rev = "5bd1091a2b3c4d5e6f708192a3b4c5d6e7f80912"
	for _, tc := range []struct {
		name     string
		stamped  string
		info     *debug.BuildInfo
		expected string
	}{
		{"-ldflags -X wins over build info", "v1.2.3", vcs("v1.0.0"), "v1.2.3"},
		{"-ldflags -X without build info", "v1.2.3", nil, "v1.2.3"},
		{"go install …@tag", "", vcs("v1.0.0"), "v1.0.0"},
		{"go build in a dirty checkout", "", vcs("v0.0.0-20260101120000-5bd1091a2b3c+dirty", "vcs.revision", rev, "vcs.modified", "true"),
			"v0.0.0-20260101120000-5bd1091a2b3c+dirty"},
		{"devel with a clean revision", "", vcs(Devel, "vcs.revision", rev, "vcs.modified", "false"), "(devel)+5bd1091a2b3c"},
		{"devel with a modified tree", "", vcs(Devel, "vcs", "git", "vcs.revision", rev, "vcs.modified", "true"), "(devel)+5bd1091a2b3c.dirty"},
		{"devel with a short revision", "", vcs(Devel, "vcs.revision", "abc"), "(devel)+abc"},
		{"go run: devel, no VCS", "", vcs(Devel), "(devel)"},
		{"test binary: no main version", "", vcs(""), "(devel)"},
		{"no build info", "", nil, "(devel)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.stamped, tc.info); got != tc.expected {
				t.Errorf("versionOf(%q, …) = %q, want %q", tc.stamped, got, tc.expected)
			}
		})
	}
}

func TestModuleVersionOf(t *testing.T) {
	info := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "k8s.io/kubernetes", Version: "v1.36.3"},
		{Path: "k8s.io/client-go", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/client-go", Version: "v0.36.3"}},
		{Path: "example.com/local", Version: "v1.0.0", Replace: &debug.Module{Path: "../local"}},
	}}
	for _, tc := range []struct {
		path   string
		want   string
		wantOK bool
	}{
		{"k8s.io/kubernetes", "v1.36.3", true},
		{"k8s.io/client-go", "v0.36.3", true}, // the replacement's version
		{"example.com/local", "v1.0.0", true}, // a directory replacement has no version of its own
		{"sigs.k8s.io/kwok", "", false},
	} {
		if got, ok := moduleVersionOf(info, tc.path); got != tc.want || ok != tc.wantOK {
			t.Errorf("moduleVersionOf(%q) = %q, %v; want %q, %v", tc.path, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestSummary: the line starts with the program and its Version and names only the modules that the build
// information records (a test binary of a package other than main records none).
func TestSummary(t *testing.T) {
	got := Summary("prog")
	if !strings.HasPrefix(got, "prog "+Version()+" (") || !strings.Contains(got, "go1.") {
		t.Errorf("Summary(prog) = %q", got)
	}
	if strings.Contains(got, "Kubernetes") || strings.Contains(got, "client-go") {
		t.Errorf("Summary(prog) = %q names modules this test binary does not link", got)
	}
}

// TestAPIVersionMatchesGoMod: APIMinor is the minor of the k8s.io/api that go.mod requires (v0.36.x is 1.36), so
// that the version skew report and UnsupportedDeploymentField name the API kubedeploy really knows.
func TestAPIVersionMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+k8s\.io/api v0\.(\d+)\.\d+`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/api")
	}
	if want := fmt.Sprintf("v1.%s", m[1]); KubernetesVersion() != want || APIMajor != 1 {
		t.Errorf("KubernetesVersion() = %s; go.mod's k8s.io/api is Kubernetes %s", KubernetesVersion(), want)
	}
}
