package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoFakes: the slim controllers binary links no client-go fake
// (clientsets, discovery, dynamic…): the simulator that uses them lives in
// internal/simulator, above the controllers, and only `kubedeploy` links it
// (issue 24).
func TestLinksNoFakes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var fakes []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "/fake") || strings.HasSuffix(pkg, "/simulator") {
			fakes = append(fakes, pkg)
		}
	}
	if len(fakes) > 0 {
		t.Errorf("kubedeploy-controllers links %d fake or simulator packages: %s", len(fakes), strings.Join(fakes, " "))
	}
}
