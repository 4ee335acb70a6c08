// Package upstream runs issue 26's spread scenario (see package spread) on the same shape of cluster with
// kube-controller-manager's own deployment and replicaset controllers, so that the skews kubedeploy leaves
// with and without kubedeploy.io/scale-down-spread are reported beside upstream's.
package upstream

import (
	"os"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	opts := harness.SpreadOptions()
	opts.Controllers = []string{}
	zones := opts.ControlPlane
	opts.ControlPlane = func(c *controlplane.Config) {
		zones(c)
		c.UpstreamWorkloadControllers = true
	}
	os.Exit(harness.Main(m, opts, &env))
}

// TestUpstreamScaleDown reports the skews upstream's controllers leave in the scenario, with the constraint per
// revision and over all the Deployment's pods (upstream ignores kubedeploy.io/scale-down-spread, so the
// Deployments carry none); RunSpreadScenario fails it if a step does not settle.
func TestUpstreamScaleDown(t *testing.T) {
	harness.Skip(t, env)
	for _, perRevision := range []bool{true, false} {
		name := map[bool]string{true: "per revision", false: "all pods"}[perRevision]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			ctx := harness.Context(t, 5*time.Minute)
			steps := harness.RunSpreadScenario(ctx, t, env.Client, harness.SpreadDeployment(ns, "web", 9, "", perRevision), 2*time.Minute)
			for _, s := range steps {
				t.Logf("kube-controller-manager, %s: %s", name, s)
			}
		})
	}
}
