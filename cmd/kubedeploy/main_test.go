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

// TestVersionFlagStops: `up --version`, `controllers --version` and the root's print the version report and exit
// 0, with nothing else on stdout or stderr, and up leaves its data dir alone (issue 44: the root printed its help,
// up and controllers started).
func TestVersionFlagStops(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "up")
	for _, args := range [][]string{
		{"--version"},
		{"up", "--data-dir", dataDir, "--api-port", "0", "--version"},
		{"controllers", "--version"},
		{"rollout", "watch", "--version=raw"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runMain(t, args...)
			want := "kubedeploy "
			if strings.HasSuffix(args[len(args)-1], "=raw") {
				want = "go\t"
			}
			if code != 0 || !strings.HasPrefix(stdout, want) || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and stdout starting %q", code, stdout, stderr, want)
			}
		})
	}
	if _, err := os.Lstat(dataDir); !os.IsNotExist(err) {
		t.Errorf("up --version created %s (%v)", dataDir, err)
	}
}

// TestKubectlArgumentsAreKubectls: `kubedeploy kubectl` hands kubectl its arguments as typed (the kubeconfig goes
// in KUBECONFIG), so a mistyped command gets kubectl's own error and suggestion, --version is kubectl's (which
// has none), and a plugin on PATH runs with its arguments and KUBECONFIG pointing at the data dir's kubeconfig
// (issue 44: a --kubeconfig put first made kubectl refuse "flags cannot be placed before plugin name").
func TestKubectlArgumentsAreKubectls(t *testing.T) {
	bin := t.TempDir()
	plugin := "#!/bin/sh\necho \"args: $*\"\necho \"KUBECONFIG=$KUBECONFIG\"\n"
	if err := os.WriteFile(filepath.Join(bin, "kubectl-hello"), []byte(plugin), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dataDir := t.TempDir() // up's, with its kubeconfig; runMain's default data dir has none
	if err := os.WriteFile(filepath.Join(dataDir, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr []string
	}{
		{[]string{"kubectl", "--data-dir", dataDir, "gett", "pods"}, 1, nil, []string{`unknown command "gett" for "kubectl"`, "Did you mean this?", "\tget\n"}},
		{[]string{"kubectl", "gett", "pods"}, 1, nil, []string{`unknown command "gett" for "kubectl"`, "Did you mean this?", "\tget\n"}}, // no kubeconfig
		{[]string{"kubectl", "--version"}, 1, nil, []string{"unknown flag: --version"}},
		{[]string{"kubectl", "--data-dir", dataDir, "hello", "a", "--b"}, 0, []string{"args: a --b\n", "KUBECONFIG=" + filepath.Join(dataDir, "kubeconfig") + "\n"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runMain(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout %q lacks %q", stdout, want)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q lacks %q", stderr, want)
				}
			}
			if strings.Contains(stderr, "flags cannot be placed before plugin name") {
				t.Errorf("stderr %q", stderr)
			}
		})
	}
}
