// Package e2e runs the kubedeploy binary as a user would: `kubedeploy up` as a
// child process, its kubeconfig, Ctrl-C (SIGINT) and a restart on the same
// data dir, and the one-line errors for bad input.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the path of the kubedeploy binary built for this package.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "kubedeploy-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "kubedeploy")
	build := exec.Command("go", "build", "-o", binary, "github.com/kubedeploy/kubedeploy/cmd/kubedeploy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building kubedeploy: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
