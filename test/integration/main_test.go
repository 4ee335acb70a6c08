// Package integration runs the real kubedeploy controllers on one embedded
// control plane (shared by every test in the package) and checks what users
// see through the API, including the rolling-update bounds at every moment.
package integration

import (
	"os"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{}, &env))
}
