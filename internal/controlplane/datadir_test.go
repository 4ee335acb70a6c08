package controlplane

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	_, err = lockDataDir(dir)
	want := fmt.Sprintf("data dir %s is in use by another kubedeploy (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second lock = %v, want %q", err, want)
	}
	if err := lock.release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = again.release()
}

func TestListenAPIPortBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, _, err = listenAPIPort(port)
	want := fmt.Sprintf("kube-apiserver port 127.0.0.1:%d is already in use", port)
	if err == nil || err.Error() != want {
		t.Fatalf("listenAPIPort(busy) = %v, want %q", err, want)
	}
}

// startFails starts a control plane that must fail fast with wantErr, one line: before any heavy step (no PKI
// generated, no etcd data, no kubeconfig written, so no API server either), with Done closed afterwards.
func startFails(t *testing.T, cfg Config, wantErr string) {
	t.Helper()
	cp, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = cp.Start(ctx)
	if err == nil {
		_ = cp.Stop()
		t.Fatalf("Start succeeded, want %q", wantErr)
	}
	t.Logf("Start failed after %s", time.Since(start))
	if err.Error() != wantErr && !strings.HasPrefix(err.Error(), wantErr) {
		t.Fatalf("Start = %q, want %q", err, wantErr)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	if cp.pki != nil || cp.AdminConfig() != nil {
		t.Errorf("Start got as far as the PKI or the admin kubeconfig before failing")
	}
	for _, p := range []string{cp.layout.pkiDir(), cp.layout.etcdDir(), cp.layout.adminKubeconfig()} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: Start got past the checks before failing", p)
		}
	}
	select {
	case <-cp.Done():
	default:
		t.Errorf("Done not closed after a failed Start")
	}
}

func TestStartBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	startFails(t, Config{DataDir: dir, APIPort: port}, fmt.Sprintf("kube-apiserver port 127.0.0.1:%d is already in use", port))
	// The lock was released: taking it again works.
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after failed start: %v", err)
	}
	_ = lock.release()
	if _, err := os.Stat(filepath.Join(dir, "etcd")); err == nil {
		t.Errorf("etcd was started although the port was busy")
	}
}

func TestStartUnwritableDataDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permissions; use a path below a regular file instead.
		parent := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(parent, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parent, "data")
		startFails(t, Config{DataDir: dir}, "data dir "+dir+" is not writable: ")
		return
	}
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(parent, 0o700)
	dir := filepath.Join(parent, "data")
	startFails(t, Config{DataDir: dir}, "data dir "+dir+" is not writable: ")
}

func TestStartDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	startFails(t, Config{DataDir: dir}, fmt.Sprintf("data dir %s is in use by another kubedeploy (pid %d)", dir, os.Getpid()))
}

func TestStopBeforeStart(t *testing.T) {
	cp, err := New(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
}
