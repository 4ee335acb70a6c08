package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRotatingLog: log files are created with mode 0600, inside a logs
// directory the writer creates, appended to across writers, and rotated at
// LogMaxSizeMB keeping LogMaxBackups old files (issue 9: etcd.log grew
// without bound, mode 0644).
func TestRotatingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "x.log")
	for _, line := range []string{"one\n", "two\n"} {
		w := RotatingLog(path)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("log file mode %o, want 600", mode)
	}
	if data, _ := os.ReadFile(path); string(data) != "one\ntwo\n" {
		t.Errorf("log content %q, want both lines appended", data)
	}
	w := RotatingLog(path)
	if w.MaxSize != LogMaxSizeMB || w.MaxBackups != LogMaxBackups || LogMaxSizeMB <= 0 || LogMaxBackups <= 0 {
		t.Errorf("rotation at %d MB keeping %d backups, want the package limits (%d, %d), both positive", w.MaxSize, w.MaxBackups, LogMaxSizeMB, LogMaxBackups)
	}
	if err := w.Rotate(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	entries, _ := os.ReadDir(filepath.Dir(path))
	var backups int
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "x-") {
			backups++
		}
	}
	if backups != 1 {
		t.Errorf("%d rotated files after Rotate, want 1 (%v)", backups, entries)
	}
}
