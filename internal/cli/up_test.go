package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpIdentityStablePerDataDir: `up` on one data dir always leads under
// the same identity, however the dir is spelled, so a restart after kill -9
// takes its own Lease at once; another data dir gets another identity
// (issue 9).
func TestUpIdentityStablePerDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o700); err != nil {
		t.Fatal(err)
	}
	abs := upIdentity(filepath.Join(dir, "data"))
	if rel := upIdentity("data"); rel != abs {
		t.Errorf("identity of ./data %q, of its absolute path %q: want the same", rel, abs)
	}
	if again := upIdentity(filepath.Join(dir, "data")); again != abs {
		t.Errorf("identity changed between calls: %q then %q", abs, again)
	}
	if other := upIdentity(filepath.Join(dir, "other")); other == abs {
		t.Errorf("two data dirs share the identity %q", abs)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(abs, host+"_up-") || len(abs) != len(host)+len("_up-")+12 {
		t.Errorf("identity %q, want %q followed by 12 hex digits", abs, host+"_up-")
	}
}
