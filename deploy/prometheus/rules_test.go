// Package prometheus holds kubedeploy's Prometheus alerting rules (kubedeploy-rules.yaml) and their unit tests
// for promtool (kubedeploy-rules.test.yaml); its Go test runs both through promtool, from Debian's prometheus
// package (.ci/run installs it), never the Prometheus Go module.
package prometheus

import (
	"os/exec"
	"testing"
)

// promtool returns promtool's path, or skips t saying how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	return path
}

// Issue 25: the rules load (promtool check rules) and the stuck-rollout alert fires after 5 minutes with the
// reason label, the failed and rolled-back alerts on their outcomes, the awaiting-promotion alert past an hour
// (EX-5) and the analysis-paused alert at once, never the stuck one on a rollout step (EX-6) (promtool test
// rules).
func TestRules(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "kubedeploy-rules.yaml"},
		{"test", "rules", "kubedeploy-rules.test.yaml"},
	} {
		out, err := exec.Command(p, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
