package controlplane

import (
	"testing"

	basecompatibility "k8s.io/component-base/compatibility"
)

func TestWithRelease(t *testing.T) {
	embedded := basecompatibility.NewEffectiveVersionFromString("1.36", "1.33", "1.33")
	served := withRelease(embedded, "v1.36.3")
	info := served.Info()
	if info.GitVersion != "v1.36.3" || info.Major != "1" || info.Minor != "36" || info.GitCommit != "" {
		t.Errorf("Info() = %+v, want gitVersion v1.36.3, major 1, minor 36, no gitCommit", info)
	}
	if info.EmulationMajor != "1" || info.EmulationMinor != "36" || info.MinCompatibilityMinor != "35" {
		t.Errorf("Info() = %+v, want emulation 1.36 and min compatibility 1.35 of the embedded version", info)
	}
	if !served.BinaryVersion().EqualTo(embedded.BinaryVersion()) || !served.EmulationVersion().EqualTo(embedded.EmulationVersion()) {
		t.Errorf("binary %s, emulation %s; want the embedded version's %s", served.BinaryVersion(), served.EmulationVersion(), embedded)
	}
	if got := withRelease(embedded, "(devel)"); got != embedded {
		t.Errorf("withRelease with a non-semantic version = %v, want the embedded version unchanged", got)
	}
}
