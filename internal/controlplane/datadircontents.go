package controlplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// dataDirContents is what a data dir held before a start, so that a start that fails can remove what it added
// and leave the data dir as it found it: a data dir that did not exist is removed with every parent directory
// the start created; in one that existed, each of a start's own entries (lock, logs/, pki/, etcd/, kubeconfig)
// that is new is removed, and so is each new entry of logs/ and pki/. Nothing else is: not a file that existed
// (its content may have changed: an appended log, a rewritten kubeconfig), not another program's new file in a
// shared directory given as data dir, and nothing new deeper down (etcd/'s files belong to etcd: they go only
// with a new etcd/ as a whole).
type dataDirContents struct {
	l layout
	// created is the topmost directory that did not exist (the data dir or a parent), or "" when the data dir
	// existed.
	created string
	// existed holds the paths of the entries of the data dir, logs/ and pki/ when the data dir existed.
	existed map[string]bool
}

// recordDataDir returns what dataDir holds now; it writes nothing. Errors: "data dir D is not writable: …" for a
// path that cannot be inspected (a file where a parent directory should be, a parent without search permission),
// "data dir D is not readable: …" for a data dir, logs/ or pki/ that cannot be listed.
func recordDataDir(dataDir string) (dataDirContents, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return dataDirContents{}, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	c := dataDirContents{l: layout{abs}, existed: map[string]bool{}}
	for dir := abs; ; dir = filepath.Dir(dir) {
		_, err := os.Lstat(dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
		}
		c.created = dir
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if c.created != "" {
		return c, nil
	}
	for _, dir := range c.recordedDirs() {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("data dir %s is not readable: %w", dataDir, err)
		}
		for _, e := range entries {
			c.existed[filepath.Join(dir, e.Name())] = true
		}
	}
	return c, nil
}

// recordedDirs are the directories whose entries are recorded: the data dir, logs/ and pki/.
func (c dataDirContents) recordedDirs() []string {
	return []string{c.l.dataDir, c.l.logsDir(), c.l.pkiDir()}
}

// removeAdded removes what was added to the data dir since recordDataDir, as the type says. The caller must hold
// the data dir's lock (no other kubedeploy can be using what is removed). It returns the first removal error.
func (c dataDirContents) removeAdded() error {
	if c.created != "" {
		return os.RemoveAll(c.created)
	}
	for _, dir := range c.recordedDirs() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // removed with its parent, or never there
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			if c.existed[path] || (dir == c.l.dataDir && !c.l.owns(path)) {
				continue
			}
			if err := os.RemoveAll(path); err != nil {
				return err
			}
		}
	}
	return nil
}

// owns reports whether path is one of the entries a start creates directly in the data dir.
func (l layout) owns(path string) bool {
	switch path {
	case l.lockFile(), l.logsDir(), l.pkiDir(), l.etcdDir(), l.adminKubeconfig():
		return true
	}
	return false
}
