package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mainEnv, set in the environment of this test binary, makes it run main instead of the tests.
const mainEnv = "KUBEDEPLOY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs main in a child process of this test binary with args and returns its stdout, stderr and exit code.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "KUBEDEPLOY_DATA_DIR="+t.TempDir(), "KUBECONFIG=")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running main: %v", err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestMainPrintsOneLine: main prints a command's error once, on one line of stderr after "kubedeploy: ", prints
// nothing on stdout, and exits 1 (issue 33). The busy port's start leaves its data dir as it found it: one that did
// not exist still does not.
func TestMainPrintsOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	newDataDir := filepath.Join(t.TempDir(), "new")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollout", "wacth", "deploy/x"}, `kubedeploy: unknown command "wacth" for "kubedeploy rollout"; did you mean "watch"?` + "\n"},
		{[]string{"up", "--zones", "0"}, "kubedeploy: --zones must be in 1..26, got 0\n"},
		{[]string{"up", "--data-dir", newDataDir, "--api-port", port}, "kubedeploy: kube-apiserver port 127.0.0.1:" + port + " is already in use\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runMain(t, tc.args...)
			if code != 1 || stderr != tc.want || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit 1, stderr %q and nothing on stdout", code, stderr, stdout, tc.want)
			}
			if _, err := os.Lstat(newDataDir); !os.IsNotExist(err) {
				t.Errorf("%s exists after the failed start (%v)", newDataDir, err)
			}
		})
	}
}
