// Package observe runs `kubedeploy observe` (observe mode of internal/manager, issue 25) on an embedded cluster
// whose deployment and replicaset controllers are kube-controller-manager's own, as on a managed cluster, with
// the read-only RBAC of deploy/observe, and checks what it exports and that it writes nothing.
package observe

import (
	"os"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{
		Controllers:     []string{},
		PodStartupDelay: 500 * time.Millisecond,
		// kube-controller-manager runs the rollouts, as on a managed cluster.
		ControlPlane: func(c *controlplane.Config) { c.UpstreamWorkloadControllers = true },
	}, &env))
}
