package manager

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// shortElection is a leader election fast enough for a unit test.
func shortElection(identity string) LeaderElection {
	l := LeaderElection{Enabled: true, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
		RetryPeriod: 200 * time.Millisecond, Identity: identity}
	l.Default()
	return l
}

// TestStopReleasesTheLeaseAfterAConflict is CM-7's release on a clean stop
// when the elector's one release attempt meets a conflict. That happened in
// CI (stop 40, TestCtrlCDuringRolloutsReleasesTheLease): a renewal cancelled
// by the shutdown still landed on the server after the elector re-read the
// Lease, so its release update failed with "the object has been modified"
// and the Lease stayed held for lease-duration. The fake answers the first
// release with a conflict; the Lease must end with no holder anyway.
func TestStopReleasesTheLeaseAfterAConflict(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	var releases, conflicts atomic.Int32
	client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		lease := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
			return false, nil, nil
		}
		if releases.Add(1) == 1 {
			conflicts.Add(1)
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
				lease.Name, errModified)
		}
		return false, nil, nil
	})
	l := shortElection("me")
	ctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runLeading(ctx, l, client, nil, func(ctx context.Context) {
			close(started)
			<-ctx.Done()
		}, nil)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the controllers never started")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runLeading after a clean stop = %v, want nil", err)
	}
	if conflicts.Load() != 1 {
		t.Fatalf("the fake answered %d release updates with a conflict, want 1 (the elector's own release)", conflicts.Load())
	}
	lease, err := client.CoordinationV1().Leases(l.ResourceNamespace).Get(context.Background(), l.ResourceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("after a clean stop the Lease is held by %q, want no holder", h)
	}
	if d := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); d != 1 {
		t.Errorf("released Lease has leaseDurationSeconds %d, want 1 (as the elector writes)", d)
	}
}

// TestReleaseLeaseLeavesAnotherHoldersLease: the retry never writes a Lease
// another process holds (it took over while this one was stopping).
func TestReleaseLeaseLeavesAnotherHoldersLease(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	l := shortElection("me")
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.ResourceNamespace, Name: l.ResourceName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	client := fake.NewClientset(held)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, l.ResourceNamespace, l.ResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: l.Identity})
	if err != nil {
		t.Fatal(err)
	}
	releaseLease(logger, lock, l)
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("releaseLease wrote another holder's Lease: %v", a)
		}
	}
	lease, err := client.CoordinationV1().Leases(l.ResourceNamespace).Get(context.Background(), l.ResourceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "other" {
		t.Errorf("holder = %q, want other", h)
	}
}

var errModified = errors.New("the object has been modified; please apply your changes to the latest version and try again")
