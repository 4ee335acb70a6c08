package leader

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestCrashedLeaderIsReplacedMidRollout: two managers, one Lease. Only the
// holder acts; when it dies (kill -9: cut off without releasing) in the middle
// of a 50-replica rollout, the standby acquires the Lease once it expires (the
// Lease goes straight from the leader's last renewal to the standby, acquired
// no earlier than that renewal plus the lease duration) and completes the
// rollout, and the ReplicaSets never break the surge or availability bounds,
// watched at every change.
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
	lease := harness.WatchLease(t, env.Client, manager.DefaultResourceNamespace, manager.DefaultResourceName)
	a.crash(t)
	took := waitHolder(t, "member-b", shortLease.LeaseDuration+30*time.Second)
	t.Logf("standby took over %.1fs after the leader was killed (lease duration %v)", took.Seconds(), shortLease.LeaseDuration)
	if err := harness.ExpiredTakeover(lease.Stop(), "member-a", "member-b"); err != nil {
		t.Error(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	w.Stop()
	w.Check(10)
	if b.link.writes.Load() == 0 {
		t.Errorf("the new leader made no writes, yet the rollout completed")
	}
}

// TestGracefulStopReleasesTheLease: a leader that is stopped (SIGTERM)
// finishes its syncs, releases the Lease and Run returns nil; the standby,
// which has been reading the Lease while it was held, takes over the released
// Lease at its next retry instead of waiting for the 15s lease to expire, and
// acts.
func TestGracefulStopReleasesTheLease(t *testing.T) {
	harness.Skip(t, env)
	ns := env.Namespace(t)
	resetLease(t)
	rc := identityConfig(t)
	le := manager.LeaderElection{Enabled: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 500 * time.Millisecond}
	a := startMember(t, "member-a", rc, le, manager.Serving{})
	waitHolder(t, "member-a", 30*time.Second)
	lease := harness.WatchLease(t, env.Client, manager.DefaultResourceNamespace, manager.DefaultResourceName)
	reads := &leaseReads{}
	b := startMember(t, "member-b", reads.wrap(rc), le, manager.Serving{})
	// Two reads: member-b has seen member-a's Lease and is retrying as a standby.
	harness.Eventually(t, 30*time.Second, "member-b to read the Lease twice", func(context.Context) (bool, error) {
		return reads.n.Load() >= 2, nil
	})
	stopped := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("graceful stop returned %v, want nil", err)
	}
	waitHolder(t, "member-b", 30*time.Second)
	t.Logf("standby took over %.1fs after the leader was stopped (lease duration %v)", time.Since(stopped).Seconds(), le.LeaseDuration)
	if err := harness.ReleasedTakeover(lease.Stop(), "member-a", "member-b"); err != nil {
		t.Errorf("the Lease was not released: %v", err)
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

// leaseReads counts the successful reads of the Lease made through a client
// configuration it wrapped.
type leaseReads struct{ n atomic.Int64 }

// wrap returns a copy of rc whose successful GETs of the Lease are counted.
func (r *leaseReads) wrap(rc *rest.Config) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK &&
				strings.HasSuffix(req.URL.Path, "/leases/"+manager.DefaultResourceName) {
				r.n.Add(1)
			}
			return resp, err
		})
	})
	return rc
}
