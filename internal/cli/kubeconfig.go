package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
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

// dataDirSource returns the kubeconfig chosen by a command's --data-dir (dataDir, given when flags say it
// changed) and the environment (currentKubeconfig), or an error for a --data-dir without a directory.
func dataDirSource(flags *pflag.FlagSet, dataDir string) (kubeconfigSource, error) {
	given := flags.Changed("data-dir")
	if given && dataDir == "" {
		return kubeconfigSource{}, errors.New("--data-dir needs a directory")
	}
	return currentKubeconfig(dataDir, given), nil
}

// useKubeconfig is how the commands that read the cluster of `kubedeploy up` (rollout, shards, observe) choose
// their kubeconfig, from flags (their --kubeconfig, and --server and --local where they have them) and src
// (dataDirSource): nothing to choose when --kubeconfig or --server is given, or for a plan with --local, which
// reads no cluster; else src's kubeconfig when a data dir chose it (not KUBECONFIG, which client-go reads
// itself) and it exists, or --data-dir named it: --kubeconfig is set to it and used is true. It returns
// src.missingError when the command would read a cluster and finds no kubeconfig: src's missing and, when the
// data dir is only the default one, kubectlHome (~/.kube/config, the last resort) missing too.
func useKubeconfig(flags *pflag.FlagSet, src kubeconfigSource, kubectlHome string) (used bool, err error) {
	if flags.Changed("kubeconfig") || flags.Changed("server") {
		return false, nil
	}
	if local, err := flags.GetBool("local"); err == nil && local {
		return false, nil
	}
	missing := src.missing()
	if src.from != fromKubeconfigEnv && (src.from == fromDataDirFlag || !missing) {
		if err := flags.Set("kubeconfig", src.path); err != nil {
			return false, err
		}
		used = true
	}
	if !missing {
		return used, nil
	}
	usesHome := src.from == fromDefault || src.from == fromDataDirEnv // what KUBECONFIG or a flag names replaces it
	if _, err := os.Stat(kubectlHome); err == nil && usesHome {
		return used, nil
	}
	return used, src.missingError()
}

// explain returns err, a command's error reading the cluster of src's kubeconfig, with what it means when src is
// a data dir's (else as it is): that the API server answering at that kubeconfig's address is another cluster
// (its certificate is not signed by the data dir's CA: another `up`, started on the same port, answers there),
// or that nothing answers there; either way it asks whether `kubedeploy up --data-dir DIR` is running.
func (s kubeconfigSource) explain(err error) error {
	if err == nil || s.dataDir == "" {
		return err
	}
	var unknownCA x509.UnknownAuthorityError
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%s (%w)", s.anotherCluster(s.server(err)), err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing answers at %s, the API server of data dir %s: is `kubedeploy up --data-dir %s` running? (%w)",
			s.server(err), s.dataDir, shellQuote(s.dataDir), err)
	}
	return err
}

// anotherCluster says that the API server at server, from s's data dir's kubeconfig, is another cluster.
func (s kubeconfigSource) anotherCluster(server string) string {
	return fmt.Sprintf("the API server at %s is not the cluster of data dir %s: its certificate is not signed by that "+
		"data dir's CA, so another cluster answers at that address; is `kubedeploy up --data-dir %s` running?",
		server, s.dataDir, shellQuote(s.dataDir))
}

// server returns the API server's address (scheme://host:port) that err, a request's error, names, else the
// server of s's kubeconfig's current context, else "its address".
func (s kubeconfigSource) server(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	if cfg, lerr := clientcmd.LoadFromFile(s.path); lerr == nil {
		if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil && cfg.Clusters[ctx.Cluster] != nil {
			return cfg.Clusters[ctx.Cluster].Server
		}
	}
	return "its address"
}
