// Package analysis runs rollout steps' analyses (EX-6) end to end: the real kubedeploy controllers on one
// embedded control plane, a real Prometheus (Debian's package) scraping a test exporter whose error rate per
// pod-template-hash the tests set, and the rolling-update bounds checked at every change.
package analysis

import (
	"os"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

// TestMain starts the control plane without controllers: the test runs them itself, pointed at its Prometheus.
func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{Controllers: []string{}}, &env))
}
