// Package helmtool gives tests Helm's own command, pinned (issue 36): the chart in deploy/chart is linted,
// rendered and refused by Helm's code, not by ours. Helm runs as a tool, built from its module at Version, never a
// dependency of this module: its k8s.io/* requirements are newer than the v0.36 pin.
package helmtool

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Module and Version are the Helm command the tests run: `go install Module@Version`.
const (
	Module  = "helm.sh/helm/v4/cmd/helm"
	Version = "v4.3.1"
)

// Env names a helm binary to use instead of building one (CI builds it once, before `go test ./...`).
const Env = "KUBEDEPLOY_HELM"

var (
	once   sync.Once
	binary string
	built  error
)

// Binary returns the path of the helm command: $KUBEDEPLOY_HELM if set, else Module@Version installed with
// `go install` into the user's cache directory (kubedeploy-helm/Version; the Go build cache makes it quick after
// the first time, which takes minutes on 2 cores and needs the module proxy). It fails t when neither is there.
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() { binary, built = install() })
	if built != nil {
		t.Fatalf("no helm command: %v (set %s to a helm %s binary, or let `go install %s@%s` reach the module proxy)", built, Env, Version, Module, Version)
	}
	return binary
}

func install() (string, error) {
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", Env, p, err)
		}
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	bin := filepath.Join(dir, "kubedeploy-helm", Version)
	cmd := exec.Command("go", "install", Module+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", Module, Version, err, out)
	}
	return filepath.Join(bin, "helm"), nil
}

// Run runs helm with args, in a fresh HELM_CONFIG_HOME, HELM_CACHE_HOME and HELM_DATA_HOME under t's temporary
// directory (no user's repositories or plugins), and returns its standard output, and its standard error with
// the error when it fails.
func Run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %v: %w\n%s%s", args, err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}
