package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestRolloutsKeepEveryReplicaServing has the intent of upstream's
// cloud-only e2e "should not disrupt a cloud load-balancer's connectivity
// during rollout" (spec 15.2) without a cloud: with maxSurge 1 and
// maxUnavailable 0, repeated rollouts never leave fewer available replicas
// than desired, nor more than one extra (RU-2..RU-6, RU-10, RU-11), at any
// ReplicaSet change the watch sees.
func TestRolloutsKeepEveryReplicaServing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	d := createDeployment(ctx, t, withStrategy(harness.NewDeployment(ns, "serving", 4, "nginx:1.9"), 1, 0))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	for i := 1; i <= 3; i++ {
		w := harness.WatchRollout(t, env.Client, ns, d.Name, harness.Bounds{MaxTotal: 5, MinAvailable: 4})
		setImage(ctx, t, ns, d.Name, d.Name, fmt.Sprintf("nginx:1.9.%d", i))
		got := harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
		w.Stop()
		w.Check(4)
		if rev := got.Annotations[revisionAnnotation]; rev != fmt.Sprint(i+1) {
			t.Errorf("after rollout %d: revision %s, want %d", i, rev, i+1)
		}
	}
}
