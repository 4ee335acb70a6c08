package controlplane

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
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

// busyPort listens on a free port of 127.0.0.1 until the test ends and returns it.
func busyPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// tree returns every path under dir (relative, "" for dir itself) with its mode and content; a missing dir is nil.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] += " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// existingDataDir returns a data dir with the files named, each holding its name: as an earlier run leaves it.
func existingDataDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		content := name
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestStartBusyPort: a busy API port fails the start with one line before anything is created or changed: a
// data dir that did not exist still does not, one that existed holds exactly what it held (issue 33).
func TestStartBusyPort(t *testing.T) {
	port := busyPort(t)
	want := fmt.Sprintf("kube-apiserver port 127.0.0.1:%d is already in use", port)
	t.Run("new data dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new", "data")
		startFails(t, Config{DataDir: dir, APIPort: port}, want)
		if _, err := os.Lstat(filepath.Dir(dir)); !os.IsNotExist(err) {
			t.Errorf("%s exists after the failed start (%v)", filepath.Dir(dir), err)
		}
	})
	t.Run("existing data dir", func(t *testing.T) {
		dir := existingDataDir(t, "lock", "logs/control-plane.log", "notes")
		before := tree(t, dir)
		startFails(t, Config{DataDir: dir, APIPort: port}, want)
		if after := tree(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("data dir changed by the failed start:\nbefore %v\nafter  %v", before, after)
		}
		// The lock is free: taking it again works.
		lock, err := lockDataDir(dir)
		if err != nil {
			t.Fatalf("lock after failed start: %v", err)
		}
		_ = lock.release()
	})
}

// TestPrepareThenStopRemovesWhatTheRunAdded: after Prepare, what the run adds to the data dir (the caller's logs
// included) goes with a Stop before Start, as with a failed Start; what was there stays, and so does what
// another program put beside it.
func TestPrepareThenStopRemovesWhatTheRunAdded(t *testing.T) {
	t.Run("new data dir", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "a")
		dir := filepath.Join(parent, "b", "data")
		cp := prepared(t, dir)
		writeFile(t, filepath.Join(dir, "logs", "kubedeploy.log"))
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(parent); !os.IsNotExist(err) {
			t.Errorf("%s, created by the run, exists after Stop (%v)", parent, err)
		}
	})
	t.Run("existing data dir", func(t *testing.T) {
		dir := existingDataDir(t, "kubeconfig", "logs/control-plane.log", "pki/ca.crt")
		before := tree(t, dir)
		cp := prepared(t, dir)
		for _, name := range []string{"logs/stderr.log", "pki/admin.crt", "etcd/member/wal", "kubeconfig.other"} {
			writeFile(t, filepath.Join(dir, name))
		}
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		before["kubeconfig.other"] = tree(t, dir)["kubeconfig.other"] // not a file of kubedeploy's: kept
		if after := tree(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("data dir after Prepare and Stop:\n got  %v\n want %v", after, before)
		}
	})
}

// prepared returns a ControlPlane on dir (port 0) after a successful Prepare.
func prepared(t *testing.T, dir string) *ControlPlane {
	t.Helper()
	cp, err := New(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Prepare(); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "lock"), filepath.Join(dir, "logs")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after Prepare: %v", err)
		}
	}
	return cp
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStillAt: a lock file removed (and created again) by a failed start is not the one at its path any more.
func TestStillAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	writeFile(t, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !stillAt(f, path) {
		t.Errorf("stillAt = false for the file at its path")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if stillAt(f, path) {
		t.Errorf("stillAt = true after the file was removed")
	}
	writeFile(t, path)
	if stillAt(f, path) {
		t.Errorf("stillAt = true for a new file at the path")
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

// TestStartDataDirInUse: a data dir in use is said so, before the port (which the other kubedeploy holds too when
// both use the default), and the lock file is left as it is.
func TestStartDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	before := tree(t, dir)
	startFails(t, Config{DataDir: dir, APIPort: busyPort(t)}, fmt.Sprintf("data dir %s is in use by another kubedeploy (pid %d)", dir, os.Getpid()))
	if after := tree(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("data dir in use changed:\nbefore %v\nafter  %v", before, after)
	}
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

// TestFailedStartRemovesNewDataDir: a start that fails after the data dir was created (here at the PKI, which
// cannot be written where a file named pki is) removes the data dir again, with the parents the start created;
// the caller's log file, opened after Prepare, goes with it.
func TestFailedStartRemovesNewDataDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "new")
	dir := filepath.Join(parent, "data")
	cp := prepared(t, dir)
	writeFile(t, filepath.Join(dir, "logs", "control-plane.log"))
	writeFile(t, filepath.Join(dir, "pki"))
	err := cp.Start(context.Background())
	if err == nil {
		_ = cp.Stop()
		t.Fatal("Start succeeded with a file where pki/ goes")
	}
	if !strings.HasPrefix(err.Error(), "pki in ") {
		t.Errorf("Start = %v, want the PKI's error", err)
	}
	if _, err := os.Lstat(parent); !os.IsNotExist(err) {
		t.Errorf("%s exists after the failed start (%v): %v", parent, err, tree(t, parent))
	}
}
