package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

var modeDurations = LeaderElection{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// newTestModeLease returns a sharded replica's hold on kube-system/kubedeploy-controllers over client, on clk.
func newTestModeLease(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock) *modeLease {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	m, err := newModeLease("kube-system/kubedeploy-controllers", "kubedeploy-system", "kubedeploy-shards", modeDurations, client, &otherMode{logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	m.clock = clk
	return m
}

func mustStep(t *testing.T, m *modeLease) {
	t.Helper()
	if err := m.step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// SH-10, the sharded side: with no Lease the replicas take it under their holder and may act for RenewDeadline;
// a peer renews it once nobody has for RetryPeriod, and a replica that sees a peer's renewal holds too; while a
// leader renews it they wait, writing nothing, and say why; once the leader stopped renewing it for LeaseDuration
// they take it over.
func TestModeLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	client := fake.NewClientset()
	a, b := newTestModeLease(t, client, clk), newTestModeLease(t, client, clk)
	mustStep(t, a)
	if !a.held() || !a.HeldUntil().Equal(time.Unix(1010, 0)) || holderOf(t, client) != "kubedeploy-sharded:kubedeploy-system/kubedeploy-shards" {
		t.Fatalf("created: held %v until %v, holder %q", a.held(), a.HeldUntil(), holderOf(t, client))
	}
	mustStep(t, b) // first read: b cannot tell when it was renewed
	clk.Step(2 * time.Second)
	mustStep(t, a) // unchanged for RetryPeriod: a renews
	mustStep(t, b) // b sees the renewal made after its last read began
	if !b.held() || !b.HeldUntil().Equal(time.Unix(1012, 0)) {
		t.Errorf("after a peer's renewal: held %v until %v, want until 1000 + RenewDeadline + RetryPeriod", b.held(), b.HeldUntil())
	}
	if err := a.release(context.Background()); err != nil || holderOf(t, client) != "" {
		t.Fatalf("release: %v, holder %q", err, holderOf(t, client))
	}

	leader := newLeaderLease(t, client, "leader-1")
	c := newTestModeLease(t, client, clk)
	writes := len(client.Actions())
	for range 7 { // 12 s of a leader renewing every 2 s
		clk.Step(2 * time.Second)
		leader.renew(t, clk)
		mustStep(t, c)
	}
	if c.held() || countWrites(client.Actions()[writes:], "leases") != 7 {
		t.Errorf("beside a renewing leader: held %v, lease writes %d (the leader's 7 only)", c.held(), countWrites(client.Actions()[writes:], "leases"))
	}
	if err := c.other.Check(nil); err == nil || !strings.Contains(err.Error(), "leader-1") {
		t.Errorf("other-mode check while waiting: %v", err)
	}
	clk.Step(14 * time.Second)
	mustStep(t, c) // unchanged for 14 s: not yet
	if c.held() {
		t.Fatal("took a Lease unchanged for less than LeaseDuration")
	}
	clk.Step(time.Second)
	mustStep(t, c)
	if !c.held() || holderOf(t, client) != c.holder || c.other.Check(nil) != nil {
		t.Errorf("after the leader stopped for LeaseDuration: held %v, holder %q, check %v", c.held(), holderOf(t, client), c.other.Check(nil))
	}
}

// leaderLease is a leader-elected process's Lease as client-go writes it.
type leaderLease struct {
	client *fake.Clientset
	id     string
}

func newLeaderLease(t *testing.T, client *fake.Clientset, id string) *leaderLease {
	l := &leaderLease{client: client, id: id}
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kubedeploy-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &l.id, new(int32(15))
	if _, err := client.CoordinationV1().Leases("kube-system").Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *leaderLease) renew(t *testing.T, clk *clocktesting.FakeClock) {
	lease, err := l.client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kubedeploy-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: clk.Now()}
	if _, err := l.client.CoordinationV1().Leases("kube-system").Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func holderOf(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kubedeploy-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// SH-10, a `kubedeploy controllers --leader-elect=false`: it waits while sharded replicas renew the leader Lease,
// and starts once they released it or stopped renewing it for LeaseDuration; a Lease of another holder does not
// stop it.
func TestWaitForShardedReplicas(t *testing.T) {
	l := LeaderElection{ResourceNamespace: "kube-system", ResourceName: "kubedeploy-controllers", LeaseDuration: 300 * time.Millisecond, RetryPeriod: 20 * time.Millisecond}
	holder := shardedHolderOf("kubedeploy-system", "kubedeploy-shards")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubedeploy-controllers"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	client := fake.NewClientset(lease)
	logger, ctx := ktesting.NewTestContext(t)
	other := &otherMode{logger: logger}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- waitForShardedReplicas(ctx, l, client, other) }()
	renewFor := time.Now().Add(time.Second)
	for time.Now().Before(renewFor) { // the sharded replicas renew for a second
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("started after %v while sharded replicas renewed the Lease: %v", time.Since(start), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := other.Check(nil); err == nil || !strings.Contains(err.Error(), "sharded replicas (kubedeploy-system/kubedeploy-shards)") {
		t.Errorf("other-mode check while waiting: %v", err)
	}
	select {
	case err := <-done:
		if err != nil || other.Check(nil) != nil {
			t.Errorf("after the renewals stopped: %v, check %v", err, other.Check(nil))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting 10 s after the sharded replicas stopped renewing")
	}
}

// countWrites counts the actions that write resource (create, update, patch, delete).
func countWrites(actions []clienttesting.Action, resource string) int {
	n := 0
	for _, a := range actions {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			if a.GetResource().Resource == resource {
				n++
			}
		}
	}
	return n
}
