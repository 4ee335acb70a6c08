package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// dataDirEnv names the environment variable that overrides the default data dir
// for commands that have no --data-dir flag of their own (kubectl).
const dataDirEnv = "KUBEDEPLOY_DATA_DIR"

// defaultDataDir returns $KUBEDEPLOY_DATA_DIR, else ~/.kubedeploy.
func defaultDataDir() string {
	home, _ := os.UserHomeDir()
	return dataDirFrom(os.Getenv(dataDirEnv), home)
}

// dataDirFrom returns dataDirEnv ($KUBEDEPLOY_DATA_DIR) when set, else <home>/.kubedeploy, else (no home)
// .kubedeploy.
func dataDirFrom(dataDirEnv, home string) string {
	switch {
	case dataDirEnv != "":
		return dataDirEnv
	case home != "":
		return filepath.Join(home, ".kubedeploy")
	}
	return ".kubedeploy"
}

// Where a kubeconfig came from (kubeconfigSource.from).
const (
	fromDataDirFlag   = "--data-dir"
	fromDataDirEnv    = dataDirEnv
	fromDefault       = "default"
	fromKubeconfigEnv = "KUBECONFIG"
)

// kubeconfigSource is the kubeconfig that `kubedeploy kubectl` and `kubedeploy rollout` read when no
// --kubeconfig is given, and what chose it, so that the error for a missing one says where it looked and how to
// point elsewhere.
type kubeconfigSource struct {
	// path is the kubeconfig: <data dir>/kubeconfig, or $KUBECONFIG (a list of files, as kubectl reads it).
	path string
	// dataDir is the data dir path is in; "" when KUBECONFIG chose it.
	dataDir string
	// from is what chose it: fromDataDirFlag, fromKubeconfigEnv, fromDataDirEnv or fromDefault.
	from string
}

// kubeconfigFrom returns the kubeconfig chosen, first to last, by --data-dir (dataDir, when dataDirGiven),
// $KUBECONFIG (kubeconfigEnv), $KUBEDEPLOY_DATA_DIR (dataDirEnv) and the default data dir <home>/.kubedeploy:
// an explicit --data-dir wins over the environment, as on `kubedeploy up`.
func kubeconfigFrom(dataDir string, dataDirGiven bool, kubeconfigEnv, dataDirEnv, home string) kubeconfigSource {
	switch {
	case dataDirGiven:
		return kubeconfigSource{path: filepath.Join(dataDir, "kubeconfig"), dataDir: dataDir, from: fromDataDirFlag}
	case kubeconfigEnv != "":
		return kubeconfigSource{path: kubeconfigEnv, from: fromKubeconfigEnv}
	}
	from := fromDefault
	if dataDirEnv != "" {
		from = fromDataDirEnv
	}
	dir := dataDirFrom(dataDirEnv, home)
	return kubeconfigSource{path: filepath.Join(dir, "kubeconfig"), dataDir: dir, from: from}
}

// currentKubeconfig is kubeconfigFrom with this process's environment and home directory.
func currentKubeconfig(dataDir string, dataDirGiven bool) kubeconfigSource {
	home, _ := os.UserHomeDir()
	return kubeconfigFrom(dataDir, dataDirGiven, os.Getenv("KUBECONFIG"), os.Getenv(dataDirEnv), home)
}

// missing reports whether no file of s.path exists (kubectl skips the missing ones of a KUBECONFIG list).
func (s kubeconfigSource) missing() bool {
	for _, p := range filepath.SplitList(s.path) {
		if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// missingError returns the one-line error for a kubeconfig that is not there: where it looked, what chose
// that place, and how to start the cluster or point elsewhere.
func (s kubeconfigSource) missingError() error {
	if s.from == fromKubeconfigEnv {
		return fmt.Errorf("no kubeconfig at %s (from KUBECONFIG): point KUBECONFIG at one that exists, "+
			"or name the data dir of `kubedeploy up` with --data-dir DIR (or unset KUBECONFIG to use %s, else ~/.kubedeploy)", s.path, dataDirEnv)
	}
	chosen, up := "the default data dir", "kubedeploy up"
	if s.from != fromDefault {
		chosen = "data dir from " + s.from
		up += " --data-dir " + shellQuote(s.dataDir)
	}
	return fmt.Errorf("no kubeconfig at %s (%s %s): start the cluster with `%s`, "+
		"or point elsewhere with --data-dir DIR, %s=DIR or KUBECONFIG=FILE", s.path, chosen, s.dataDir, up, dataDirEnv)
}

// shellQuote returns s as one word for a POSIX shell: as it is when it holds only characters no shell treats
// specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
