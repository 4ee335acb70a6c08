package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// upProcess is a running `kubedeploy up`.
type upProcess struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

func skipShort(t *testing.T) {
	t.Helper()
	if binary == "" {
		t.Skip("e2e tests need the kubedeploy binary (not built with -short)")
	}
}

// startUp runs `kubedeploy up` with args and waits for its ready line.
func startUp(t testing.TB, args ...string) *upProcess {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"up"}, args...)...)
	out := &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &upProcess{cmd: cmd, out: out, exited: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		// Read stdout to its end before Wait, which closes the pipe: the
		// last line (the goodbye) must not be lost.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = out.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, "Press Ctrl-C to stop") { // the last line of the ready message
				close(ready)
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case <-ready:
		return p
	case err := <-p.exited:
		t.Fatalf("kubedeploy up exited before it was ready: %v\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("kubedeploy up not ready after 3 minutes:\n%s", out)
	}
	return nil
}

// interrupt sends SIGINT (Ctrl-C) and waits for a clean exit.
func (p *upProcess) interrupt(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("kubedeploy up exited with %v after SIGINT:\n%s", err, p.out)
		}
	case <-time.After(time.Minute):
		t.Fatalf("kubedeploy up did not stop within a minute of SIGINT:\n%s", p.out)
	}
}

func (p *upProcess) kill() {
	select {
	case err := <-p.exited:
		p.exited <- err
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func clientFor(t testing.TB, dataDir string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// runFails runs kubedeploy with args, expecting it to fail within a minute
// with exit code 1 and a single line on stderr containing want.
func runFails(t *testing.T, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("kubedeploy %v: got %v, want exit code 1; stderr:\n%s", args, err, stderr.String())
	}
	msg := strings.TrimSpace(stderr.String())
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
		t.Errorf("kubedeploy %v: stderr %q, want one line containing %q", args, msg, want)
	}
}

// TestBadInput: a busy --api-port, an unwritable --data-dir and a second `up`
// on a data dir in use each fail at once with one line, leaving nothing
// running (issue "kubedeploy up", done-when).
func TestBadInput(t *testing.T) {
	skipShort(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	busyDir := t.TempDir()
	runFails(t, "already in use", "up", "--data-dir", busyDir, "--api-port", fmt.Sprint(port))
	// Nothing was left behind: the same data dir starts fine on another port.
	p := startUp(t, "--data-dir", busyDir, "--api-port", "0")

	// A second `up` on the data dir in use.
	runFails(t, "in use", "up", "--data-dir", busyDir, "--api-port", "0")
	p.interrupt(t)

	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	runFails(t, "not writable", "up", "--data-dir", filepath.Join(file, "sub"), "--api-port", "0")
	runFails(t, "unknown controller", "up", "--data-dir", t.TempDir(), "--controllers", "statefulset")
}
