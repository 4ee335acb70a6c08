// Package cluster checks issue 22's first Done-when item as it is written: `kubedeploy up` is a whole cluster. On
// a control plane configured and timed as `up` is (harness.UpOptions: up's default kube-controller-manager
// controllers, pods Ready 1 s after they are scheduled), with kubedeploy's own Deployment and ReplicaSet
// controllers: a Service in front of a Deployment gets an EndpointSlice of its ready pods' IPs, which never lists
// fewer ready endpoints than replicas − maxUnavailable during a rolling update (watched at every change); a Job
// completes; a CronJob creates Jobs; a ResourceQuota counts pods and its admission refuses one over the quota; a
// PodDisruptionBudget reports its allowed disruptions; a DaemonSet runs a pod on every node. And issue 47's simulated
// crash loop: pods of an image tagged "crashloop*" restart again and again while others never do.
package cluster

import (
	"os"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.UpOptions(), &env))
}
