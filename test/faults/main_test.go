// Package faults runs kubedeploy's controllers behind a fault-injecting proxy
// (internal/testing/faultproxy) on one embedded control plane, and checks
// what really happens through a client that bypasses the proxy: lagging
// watches, API errors and controller restarts must never break a bound
// (spec IM-4, IM-2, IM-6, RU-10, RU-11). Tests run one at a time: each starts
// its own controllers and stops them when it ends.
package faults

import (
	"os"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	// No controllers of the package's own: each test runs them behind its proxy.
	os.Exit(harness.Main(m, harness.Options{Controllers: []string{}}, &env))
}
