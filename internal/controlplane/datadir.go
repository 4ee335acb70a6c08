package controlplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// layout names every path under the data dir. It is pure: building it touches nothing.
type layout struct {
	dataDir string
}

func (l layout) etcdDir() string         { return filepath.Join(l.dataDir, "etcd") }
func (l layout) pkiDir() string          { return filepath.Join(l.dataDir, "pki") }
func (l layout) logsDir() string         { return filepath.Join(l.dataDir, "logs") }
func (l layout) lockFile() string        { return filepath.Join(l.dataDir, "lock") }
func (l layout) adminKubeconfig() string { return filepath.Join(l.dataDir, "kubeconfig") }
func (l layout) pki(name string) string  { return filepath.Join(l.pkiDir(), name) }
func (l layout) log(name string) string  { return filepath.Join(l.logsDir(), name) }

// ensureWritable creates dir (and parents) and proves it is writable by creating and removing a probe file.
func ensureWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	name := probe.Name()
	_ = probe.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", dir, err)
	}
	return nil
}

// dataDirLock is an exclusive flock on <data-dir>/lock, holding our pid for the error message of the next comer.
type dataDirLock struct {
	file *os.File
}

// inUseError is the error for a data dir locked by another process: "data dir <dir> is in use by another
// kubedeploy (pid N)".
type inUseError struct {
	dataDir, pid string
}

func (e *inUseError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another kubedeploy (pid %s)", e.dataDir, e.pid)
}

// lockAttempts is how often lockDataDir opens and locks the lock file again when the file it locked is no longer
// the one at its path (a failed start removed it meanwhile, see dataDirContents.removeAdded).
const lockAttempts = 3

// lockDataDir takes the exclusive, non-blocking lock on the data dir. If another process holds it, the error is
// an *inUseError: "data dir <dir> is in use by another kubedeploy (pid N)".
func lockDataDir(dataDir string) (*dataDirLock, error) {
	path := layout{dataDir}.lockFile()
	for range lockAttempts {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, &inUseError{dataDir: dataDir, pid: lockHolder(path)}
			}
			return nil, fmt.Errorf("lock data dir %s: %w", dataDir, err)
		}
		// A start that failed removes the lock file it created while it holds the lock: the file locked here
		// may be that removed one, which locks nothing any more.
		if !stillAt(f, path) {
			_ = f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &dataDirLock{file: f}, nil
	}
	return nil, fmt.Errorf("lock data dir %s: its lock file was removed %d times while locking", dataDir, lockAttempts)
}

// stillAt reports whether the open file f is the file at path.
func stillAt(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(open, now)
}

// checkNotInUse returns an *inUseError when another process holds the data dir's lock, without creating or
// writing anything: a missing lock file (or data dir) is not in use. It is the first check of a start, so that
// a second `up` on a data dir says so, rather than that the port (the same default) is busy.
func checkNotInUse(dataDir string) error {
	path := layout{dataDir}.lockFile()
	f, err := os.Open(path)
	if err != nil {
		return nil // no lock file: not in use; any other problem shows when the lock is taken
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &inUseError{dataDir: dataDir, pid: lockHolder(path)}
		}
		return nil
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// lockHolder reads the pid written by the holder of the lock, or "unknown".
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// release drops the lock. The file stays, unless a failed start created it (dataDirContents.removeAdded, before
// release): a process that opened it meanwhile finds it gone once it holds the lock, and tries again.
func (l *dataDirLock) release() error {
	if l == nil || l.file == nil {
		return nil
	}
	err := unix.Flock(int(l.file.Fd()), unix.LOCK_UN)
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	l.file = nil
	return err
}

// listenAPIPort listens on 127.0.0.1:port (0 = any free port). A busy port gives
// "kube-apiserver port 127.0.0.1:N is already in use".
func listenAPIPort(port int) (net.Listener, int, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, 0, fmt.Errorf("kube-apiserver port %s is already in use", addr)
		}
		return nil, 0, fmt.Errorf("listen on kube-apiserver port %s: %w", addr, err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are free when returned; another process could
// take one before we bind it, which only makes Start fail with a clear error.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
