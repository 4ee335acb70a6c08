package shard

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestReplicasShareAndHandOver plays SH-1, SH-2, SH-5, SH-7 and SH-8 out on two coordinators over a fake API
// server that keeps resourceVersions: the first creates the ring and runs every bucket; the second joins and
// gets half, one release at a time; the first is cut off from its Lease, stops acting within RenewDeadline, and
// the second takes its buckets once the Lease has expired, then deletes that Lease and removes the first from
// the ring's members; the first comes back, claims nothing of its old epoch, joins again and gets half again by
// the plan. The ring counts the moves by cause: 4 initial, 2 left, 4 joined. A sampler checks all along that no
// bucket is acted on by both. Then both leave: every bucket is unowned, the members and the Leases are gone.
func TestReplicasShareAndHandOver(t *testing.T) {
	client := newRingClient()
	rec := &recorder{runs: map[int][]*fakeRun{}}
	stopSampling := sampleEvery(rec, 2*time.Millisecond)
	a := startReplica(t, client, rec, "a")
	waitRunning(t, "a alone", map[*replica]int{a: 4})
	b := startReplica(t, client, rec, "b")
	waitRunning(t, "a and b", map[*replica]int{a: 2, b: 2})

	a.cut.Store(true)
	cutAt := time.Now()
	waitRunning(t, "a cut off", map[*replica]int{a: 0, b: 4})
	if took := time.Since(cutAt); took < fastDurations.LeaseDuration-fastDurations.RetryPeriod {
		t.Errorf("b had every bucket %v after a was cut off, before a's Lease could expire (%v)", took, fastDurations.LeaseDuration)
	}
	waitReaped(t, client, "a", "b")
	a.cut.Store(false)
	waitRunning(t, "a back", map[*replica]int{a: 2, b: 2})
	want := map[MoveCause]int64{MoveInitial: 4, MoveJoined: 4, MoveLeft: 2}
	if ring := ringIn(t, client); !maps.Equal(ring.Moves, want) || len(ring.Members) != 2 {
		t.Errorf("the ring counts moves %v (want %v) and has members %+v (want a and b)", ring.Moves, want, ring.Members)
	}
	stopSampling()
	if len(rec.violations) > 0 {
		t.Fatalf("SH-1 broken: %v", rec.violations[:min(5, len(rec.violations))])
	}
	a.stop()
	b.stop()
	checkLeft(t, client)
}

// TestResplitFollowsThePods is SH-5's "bounds follow the namespaces weighted by pods": a ring made on an empty
// cluster has equal-width buckets, and sequential namespaces created afterwards all fall into few of them;
// once the owners' caches show it, the lowest replica asks for a re-split, every owner stops and releases its
// buckets, the new bounds replace the old only when no live replica owns one, and the buckets are taken again,
// each holding a quarter of the namespaces. No namespace is ever acted on by two runs at once (the sampler
// compares ranges, old bounds against new).
func TestResplitFollowsThePods(t *testing.T) {
	client := newRingClient()
	cluster := sequential("ns-%02d", 20, 10)
	var created atomic.Bool
	rec := &recorder{runs: map[int][]*fakeRun{}, cluster: cluster, visible: &created}
	measure := func(context.Context) (map[string]int, error) {
		if !created.Load() {
			return map[string]int{}, nil // the ring is made before the namespaces exist
		}
		return cluster, nil
	}
	stopSampling := sampleEvery(rec, 2*time.Millisecond)
	a := startReplicaWith(t, client, rec, Config{Identity: "a", Measure: measure, MinResplitInterval: time.Millisecond})
	waitRunning(t, "a alone", map[*replica]int{a: 4})
	created.Store(true)
	b := startReplicaWith(t, client, rec, Config{Identity: "b", Measure: measure, MinResplitInterval: time.Millisecond})
	waitRunning(t, "a and b", map[*replica]int{a: 2, b: 2})
	deadline := time.Now().Add(30 * time.Second)
	for ring := ringIn(t, client); ring.LastResplit == nil || ring.Resplitting() || !evenly(ring, 5); ring = ringIn(t, client) {
		if time.Now().After(deadline) {
			t.Fatalf("no balanced re-split: %+v", ring)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitRunning(t, "a and b after the re-split", map[*replica]int{a: 2, b: 2})
	stopSampling()
	if len(rec.violations) > 0 {
		t.Fatalf("SH-1 broken: %v", rec.violations[:min(5, len(rec.violations))])
	}
}

// waitReaped waits until dead's Lease is gone and the ring's only member is survivor (SH-8's clean-up).
func waitReaped(t *testing.T, client *fake.Clientset, dead, survivor string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), MemberLeaseName(dead), metav1.GetOptions{})
		ring := ringIn(t, client)
		if apierrors.IsNotFound(err) && len(ring.Members) == 1 && ring.Members[0].Identity == survivor {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not reaped: its Lease %v, members %+v", dead, err, ring.Members)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ringIn(t *testing.T, client *fake.Clientset) Ring {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), DefaultRingName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := DecodeRing(cm)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// evenly reports whether every bucket holds per±1 namespaces and has an owner.
func evenly(ring Ring, per int) bool {
	for _, b := range ring.Buckets {
		if abs(b.Namespaces-per) > 1 || b.Owner == "" {
			return false
		}
	}
	return true
}

// sampleEvery runs rec.sample every d until the returned stop is called.
func sampleEvery(rec *recorder, d time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(d):
				rec.sample()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// checkLeft checks that replicas that left released every bucket and deleted their Leases.
func checkLeft(t *testing.T, client *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, DefaultRingName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := DecodeRing(cm)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range ring.Buckets {
		if b.Owner != "" || b.UnownedSince == nil {
			t.Errorf("bucket %d after both left: owner %q, unowned since %v", i, b.Owner, b.UnownedSince)
		}
		if b.Claims < 1 {
			t.Errorf("bucket %d was never claimed", i)
		}
		if b.Pods != 0 { // measured 5 pods a namespace at creation; the runners' caches hold none
			t.Errorf("bucket %d: %d pods in the ring, not refreshed from its owner's caches (0)", i, b.Pods)
		}
	}
	if len(ring.Members) > 0 {
		t.Errorf("members after both left: %+v", ring.Members)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, MemberLeaseName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Lease of %s after it left: %v", id, err)
		}
	}
}
