package controlplane

import (
	"flag"
	"fmt"
	"io"
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
// its own severity. The file is opened now and stays open, so that a failed
// start that removes the data dir (ControlPlane.Start) is not undone by a
// late log line creating it again. The returned function flushes and closes
// the file, and discards klog's output from then on for the same reason.
// Errors: the file or its directory cannot be created, in which case klog is
// unchanged.
func RedirectComponentLogs(path string, v int) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f := RotatingLog(path)
	// A write of nothing opens the file: an unwritable data dir fails here, not at the first log line.
	if _, err := f.Write(nil); err != nil {
		return nil, err
	}
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
		klog.SetOutput(io.Discard)
		_ = f.Close()
	}, nil
}
