package controlplane

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"gopkg.in/natefinch/lumberjack.v2"
	"k8s.io/klog/v2"
)

// Log rotation of every log file in <data-dir>/logs (lumberjack): a file is
// rotated at LogMaxSizeMB and LogMaxBackups old ones are kept; new files are
// created with mode 0600.
const (
	LogMaxSizeMB  = 20
	LogMaxBackups = 3
)

// RotatingLog returns a writer appending to the log file at path, rotated as
// the constants above say. The file and its directory (mode 0700) are created
// on the first write; Close closes the current file.
func RotatingLog(path string) *lumberjack.Logger {
	return &lumberjack.Logger{Filename: path, MaxSize: LogMaxSizeMB, MaxBackups: LogMaxBackups}
}

// RedirectComponentLogs sends the process-wide klog output, which the
// embedded kube-apiserver, scheduler and controller-manager write to, into
// the file at path (a RotatingLog, created with mode 0600, appended to), at
// verbosity v, and nothing of it to stderr: every message is written once, at
// its own severity. The returned function flushes and closes the file.
// Errors: the file or its directory cannot be created, in which case klog is
// unchanged.
func RedirectComponentLogs(path string, v int) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// Open once now so an unwritable data dir fails here, not at the first log line.
	probe, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	_ = probe.Close()
	f := RotatingLog(path)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{
		"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL",
		"one_output": "true", "v": strconv.Itoa(v),
	} {
		if err := fs.Set(name, value); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("configuring component logs: %w", err)
		}
	}
	klog.SetOutput(f)
	return func() {
		klog.Flush()
		_ = f.Close()
	}, nil
}
