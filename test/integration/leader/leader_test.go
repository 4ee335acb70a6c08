package leader

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestCrashedLeaderIsReplacedMidRollout: two managers, one Lease. Only the
// holder acts; when it dies (kill -9: cut off without releasing) in the middle
// of a 50-replica rollout, the standby acquires the Lease once it expires and
// completes the rollout, and the ReplicaSets never break the surge or
// availability bounds, watched at every change.
func TestCrashedLeaderIsReplacedMidRollout(t *testing.T) {
	harness.Skip(t, env)
	ns := env.Namespace(t)
	resetLease(t)
	rc := identityConfig(t)
	a := startMember(t, "member-a", rc, shortLease, manager.Serving{})
	waitHolder(t, "member-a", 30*time.Second)
	b := startMember(t, "member-b", rc, shortLease, manager.Serving{})

	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "web", 50, "nginx:1.9")
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 90*time.Second)
	if h, err := holder(ctx); err != nil || h != "member-a" {
		t.Fatalf("Lease holder = %q (%v), want member-a still", h, err)
	}
	if a.link.writes.Load() == 0 || b.link.writes.Load() != 0 {
		t.Fatalf("writes: leader %d, standby %d; want the leader only", a.link.writes.Load(), b.link.writes.Load())
	}

	// 50 replicas, 25%: maxSurge 13 (rounded up), maxUnavailable 12 (rounded down).
	w := harness.WatchRollout(t, env.Client, ns, "web", harness.Bounds{MaxTotal: 63, MinAvailable: 38})
	setImage(ctx, t, ns, "web", "nginx:1.9.3")
	waitMidRollout(t, ns, "web")
	a.crash(t)
	crashed := time.Now()
	waitHolder(t, "member-b", shortLease.LeaseDuration+30*time.Second)
	took := time.Since(crashed)
	t.Logf("standby took over %.1fs after the leader was killed (lease duration %v)", took.Seconds(), shortLease.LeaseDuration)
	if limit := shortLease.LeaseDuration + 5*time.Second; took > limit {
		t.Errorf("takeover took %v, want within lease duration + 5s (%v)", took, limit)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	w.Stop()
	w.Check(10)
	if b.link.writes.Load() == 0 {
		t.Errorf("the new leader made no writes, yet the rollout completed")
	}
}

// TestGracefulStopReleasesTheLease: a leader that is stopped (SIGTERM)
// finishes its syncs, releases the Lease and Run returns nil; the standby
// takes over at its next retry, long before the 15s lease would have expired,
// and acts.
func TestGracefulStopReleasesTheLease(t *testing.T) {
	harness.Skip(t, env)
	ns := env.Namespace(t)
	resetLease(t)
	rc := identityConfig(t)
	le := manager.LeaderElection{Enabled: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 500 * time.Millisecond}
	a := startMember(t, "member-a", rc, le, manager.Serving{})
	waitHolder(t, "member-a", 30*time.Second)
	b := startMember(t, "member-b", rc, le, manager.Serving{})
	time.Sleep(time.Second) // let member-b observe the leader and stand by
	stopped := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("graceful stop returned %v, want nil", err)
	}
	waitHolder(t, "member-b", 30*time.Second)
	took := time.Since(stopped)
	t.Logf("standby took over %.1fs after the leader was stopped (lease duration %v)", took.Seconds(), le.LeaseDuration)
	if took > 5*time.Second {
		t.Errorf("takeover took %v: the Lease was not released (it would expire after %v)", took, le.LeaseDuration)
	}
	ctx := harness.Context(t, 2*time.Minute)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "after", 5, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "after", time.Minute)
	if b.link.writes.Load() == 0 {
		t.Errorf("member-b made no writes")
	}
}

// TestLosingTheLeaseStopsTheWorkers: a leader that cannot renew stops its
// controllers and Run returns manager.ErrLeaderElectionLost (the CLI exits 1).
func TestLosingTheLeaseStopsTheWorkers(t *testing.T) {
	harness.Skip(t, env)
	resetLease(t)
	a := startMember(t, "member-a", identityConfig(t), shortLease, manager.Serving{})
	waitHolder(t, "member-a", 30*time.Second)
	a.link.cut.Store(true)
	select {
	case err := <-a.done:
		a.done <- err
		if err != manager.ErrLeaderElectionLost {
			t.Fatalf("Run returned %v, want ErrLeaderElectionLost", err)
		}
	case <-time.After(shortLease.RenewDeadline + 30*time.Second):
		t.Fatal("Run did not return after the leader could no longer renew")
	}
}

func setImage(ctx context.Context, t *testing.T, ns, name, image string) {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = image
	if _, err := env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitMidRollout waits until the new ReplicaSet has some but not all of the updated replicas.
func waitMidRollout(t *testing.T, ns, name string) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the rollout to be under way", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return midRollout(d), nil
	})
}

func midRollout(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= 5 && d.Status.UpdatedReplicas < *d.Spec.Replicas-10
}
