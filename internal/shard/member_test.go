package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var testDurations = Durations{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// TestEpochs is SH-2's fencing arithmetic: a claim of epoch e is valid until RenewDeadline after the start of
// the last successful renewal; a renewal that ends after that starts a new epoch, so the old claims stay
// invalid for good; a failed renewal extends nothing.
func TestEpochs(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	client := fake.NewClientset()
	m := NewMembership(client, "kube-system", DefaultRingName, "me", testDurations, clk)
	if m.Epoch() != 0 {
		t.Fatal("valid before any renewal")
	}
	mustRenew(t, m)
	if m.Epoch() != 1 || !m.Valid(1) {
		t.Fatalf("after the first renewal: epoch %d", m.Epoch())
	}
	clk.Step(9 * time.Second)
	mustRenew(t, m) // within the deadline: same epoch, validity from this renewal
	clk.Step(9 * time.Second)
	if !m.Valid(1) {
		t.Fatal("epoch 1 ended within RenewDeadline of a renewal")
	}
	failing := errors.New("API server unreachable")
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, failing })
	if err := m.Renew(ctx); !errors.Is(err, failing) {
		t.Fatalf("Renew = %v, want the API error", err)
	}
	clk.Step(time.Second + time.Millisecond)
	if m.Valid(1) || m.Epoch() != 0 {
		t.Fatal("still valid RenewDeadline after the last successful renewal")
	}
	client.ReactionChain = client.ReactionChain[1:]
	mustRenew(t, m)
	if m.Epoch() != 2 || m.Valid(1) {
		t.Fatalf("after a lapse: epoch %d, epoch 1 valid %v; want 2 and false", m.Epoch(), m.Valid(1))
	}
	lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, MemberLeaseName("me"), metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != "me" || lease.Labels[MemberLabel] != DefaultRingName {
		t.Fatalf("the Lease: %+v, %v", lease, err)
	}
}

func mustRenew(t *testing.T, m *Membership) {
	t.Helper()
	if err := m.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPeersExpire is SH-7's expiry as leader election observes it: a peer is live while its Lease changed
// within LeaseDuration of this replica's clock; a peer only named in the ring counts from when it was first
// named; ConfirmExpired asks the API server and restarts the clock on a change.
func TestPeersExpire(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	client := fake.NewClientset()
	m := NewMembership(client, "kube-system", DefaultRingName, "me", testDurations, clk)
	peer := NewMembership(client, "kube-system", DefaultRingName, "peer", testDurations, clk)
	mustRenew(t, m)
	mustRenew(t, peer)
	m.Observe("peer", getLease(t, client, "peer"))
	m.Known("ghost")
	if live := m.Live(); !equal(live, []string{"me", "peer"}) {
		t.Fatalf("Live = %v", live)
	}
	clk.Step(testDurations.LeaseDuration - time.Second)
	mustRenew(t, m)
	if expired, err := m.ConfirmExpired(ctx, "peer"); err != nil || expired {
		t.Fatalf("peer expired before LeaseDuration: %v %v", expired, err)
	}
	mustRenew(t, peer) // the API server has a newer renewal than the cache
	clk.Step(2 * time.Second)
	if expired, _ := m.ConfirmExpired(ctx, "peer"); expired {
		t.Fatal("a renewed peer confirmed expired")
	}
	if expired, _ := m.ConfirmExpired(ctx, "ghost"); !expired {
		t.Fatal("a replica without a Lease, named LeaseDuration ago, is not expired")
	}
	clk.Step(testDurations.LeaseDuration)
	mustRenew(t, m)
	if expired, _ := m.ConfirmExpired(ctx, "peer"); !expired {
		t.Fatal("a peer silent for LeaseDuration is not expired")
	}
	if live := m.Live(); !equal(live, []string{"me"}) {
		t.Fatalf("Live = %v, want only me", live)
	}
}

func getLease(t *testing.T, client *fake.Clientset, identity string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), MemberLeaseName(identity), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDeleteLease: an expired peer's Lease is deleted conditioned on the version observed, so a peer that
// renewed meanwhile keeps its Lease (the API server answers Conflict); deleting a Lease that is gone is not an
// error; Silent and Peers follow.
func TestDeleteLease(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	client := newRingClient() // Leases keep resourceVersions
	client.PrependReactor("delete", "leases", preconditionsChecked(client))
	m := NewMembership(client, "kube-system", DefaultRingName, "me", testDurations, clk)
	for _, id := range []string{"gone", "renewing"} {
		mustRenew(t, NewMembership(client, "kube-system", DefaultRingName, id, testDurations, clk))
		m.Observe(id, getLease(t, client, id))
	}
	if peers := m.Peers(); !equal(peers, []string{"gone", "renewing"}) {
		t.Fatalf("Peers = %v", peers)
	}
	clk.Step(testDurations.LeaseDuration)
	if !m.Silent("gone") || m.Silent("never-seen") {
		t.Fatalf("Silent: gone %v, never-seen %v; want true, false", m.Silent("gone"), m.Silent("never-seen"))
	}
	clk.Step(time.Millisecond) // a renewal the cache has not shown yet
	mustRenew(t, NewMembership(client, "kube-system", DefaultRingName, "renewing", testDurations, clk))
	if err := m.DeleteLease(ctx, "renewing"); !apierrors.IsConflict(err) {
		t.Fatalf("DeleteLease of a renewed Lease = %v, want Conflict", err)
	}
	if err := m.DeleteLease(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, MemberLeaseName("gone"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted Lease: %v", err)
	}
	if peers := m.Peers(); !equal(peers, []string{"renewing"}) || !m.Silent("gone") {
		t.Fatalf("after the delete: Peers %v, gone silent %v; want [renewing], true", peers, m.Silent("gone"))
	}
	if err := m.DeleteLease(ctx, "gone"); err != nil {
		t.Fatalf("deleting it again: %v", err)
	}
}

// preconditionsChecked is a delete reactor that refuses, as the API server does, a delete whose
// resourceVersion precondition the object no longer has (the fake clientset ignores preconditions).
func preconditionsChecked(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		pre := d.DeleteOptions.Preconditions
		if pre == nil || pre.ResourceVersion == nil {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(d.Resource, d.Namespace, d.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := obj.(*coordinationv1.Lease).ResourceVersion; rv != *pre.ResourceVersion {
			return true, nil, apierrors.NewConflict(d.Resource.GroupResource(), d.Name, errors.New("precondition failed"))
		}
		return false, nil, nil
	}
}
