package cli

import (
	"reflect"
	"testing"

	componentversion "k8s.io/component-base/version"
)

func TestKubectlArgs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		kubeconfig string
		want       []string
	}{
		{"defaults to the data dir", []string{"get", "pods"}, "", []string{"--kubeconfig=/d/kubeconfig", "get", "pods"}},
		{"KUBECONFIG wins", []string{"get", "pods"}, "/k", []string{"get", "pods"}},
		{"--kubeconfig flag wins", []string{"--kubeconfig", "/x", "get"}, "", []string{"--kubeconfig", "/x", "get"}},
		{"--kubeconfig= flag wins", []string{"get", "--kubeconfig=/x"}, "", []string{"get", "--kubeconfig=/x"}},
		{"after -- is not a flag", []string{"exec", "p", "--", "--kubeconfig=/x"}, "", []string{"--kubeconfig=/d/kubeconfig", "exec", "p", "--", "--kubeconfig=/x"}},
		{"--data-dir wins over KUBECONFIG", []string{"--data-dir", "/e", "get", "pods"}, "/k", []string{"--kubeconfig=/e/kubeconfig", "get", "pods"}},
		{"--data-dir= form", []string{"get", "--data-dir=/e", "pods"}, "", []string{"--kubeconfig=/e/kubeconfig", "get", "pods"}},
		{"--kubeconfig wins over --data-dir", []string{"--data-dir=/e", "--kubeconfig=/x", "get"}, "", []string{"--kubeconfig=/x", "get"}},
		{"--data-dir after -- is kept", []string{"exec", "p", "--", "--data-dir=/e"}, "", []string{"--kubeconfig=/d/kubeconfig", "exec", "p", "--", "--data-dir=/e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, given, rest := takeDataDir(tc.args)
			if !given {
				dir = "/d"
			}
			if got := kubectlArgs(rest, tc.kubeconfig, dir, given); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kubectlArgs(%v) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestDefaultDataDirFromEnv(t *testing.T) {
	t.Setenv(dataDirEnv, "/somewhere")
	if got := defaultDataDir(); got != "/somewhere" {
		t.Errorf("defaultDataDir() = %q, want /somewhere", got)
	}
}

func TestKubectlRelease(t *testing.T) {
	for _, tc := range []struct {
		module                string
		version, major, minor string
		ok                    bool
	}{
		{"v0.36.3", "v1.36.3", "1", "36", true},
		{"v0.37.0-alpha.1", "v1.37.0-alpha.1", "1", "37", true},
		{"v1.36.3", "", "", "", false},
		{"v0.36", "", "", "", false},
		{"(devel)", "", "", "", false},
	} {
		version, major, minor, ok := kubectlRelease(tc.module)
		if version != tc.version || major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("kubectlRelease(%q) = %q, %q, %q, %v; want %q, %q, %q, %v",
				tc.module, version, major, minor, ok, tc.version, tc.major, tc.minor, tc.ok)
		}
	}
}

// TestStampComponentVersion: after stamping, kubectl's client version (component-base's version.Get) is the
// stamped one. (Build information, and so stampKubectlVersion's k8s.io/kubectl version,
// exists in main binaries only; test/e2e checks the built binary's `kubectl version`.)
func TestStampComponentVersion(t *testing.T) {
	if err := stampComponentVersion("v1.36.3", "1", "36"); err != nil {
		t.Fatal(err)
	}
	if got := componentversion.Get(); got.GitVersion != "v1.36.3" || got.Major != "1" || got.Minor != "36" || got.GitCommit != "" {
		t.Errorf("client version after stamping v1.36.3 = %+v", got)
	}
}
