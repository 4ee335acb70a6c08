package controllerscmd

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestDefaultGCPercent: without GOGC the controllers collect at GCPercent; a GOGC in the environment wins and is
// left to the runtime.
func TestDefaultGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "80") // restores the variable after the test
	if got := defaultGCPercent(); got != 80 {
		t.Errorf("with GOGC=80: %d; want 80", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Errorf("with GOGC set the target was changed to %d", now)
	}
	t.Setenv("GOGC", "off")
	if got := defaultGCPercent(); got != -1 {
		t.Errorf("with GOGC=off: %d; want -1", got)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := defaultGCPercent(); got != GCPercent {
		t.Errorf("without GOGC: %d; want %d", got, GCPercent)
	}
	if now := debug.SetGCPercent(100); now != GCPercent {
		t.Errorf("without GOGC the runtime's target is %d; want %d", now, GCPercent)
	}
}
