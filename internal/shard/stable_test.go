package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// issueCluster is issue 45's scenario, scaled by scale: 24 namespaces, each with one Deployment of 2 to 8
// replicas (×scale: their steady pods).
func issueCluster(scale int) map[string]int {
	m := map[string]int{}
	for i := range 24 {
		m[fmt.Sprintf("team-%02d", i+1)] = (2 + i*5%7) * scale
	}
	return m
}

// TestSurgeMovesNothing is SH-8 on three coordinators over a fake API server, with issue 45's 24 namespaces
// (Deployments of 20 to 80 replicas, so that a surge is well past the refresh rule's 10 pods) in 12 buckets:
// once the ring has settled, three rounds of rollouts make the cached pods of half the namespaces (another
// half each round) swing by a rollout's surge (maxSurge 25%), which the owners see (Running.Pods) but do not
// publish (Running.Steady): no bucket changes owner, no re-split is asked for, the ring's weights stay the
// steady ones and its move counts stay as they were. Weights are refreshed as often as the coordinators
// reconcile, so a surge that reached the ring would move buckets here (it did, with refreshWeights publishing
// Pods).
func TestSurgeMovesNothing(t *testing.T) {
	cluster := issueCluster(10)
	var round atomic.Int64
	surge := func(ns string) int {
		if r := round.Load(); r > 0 && (Hash(ns)>>8+uint64(r))%2 == 0 {
			return (cluster[ns] + 3) / 4
		}
		return 0
	}
	client := newRingClient()
	rec := &recorder{runs: map[int][]*fakeRun{}, cluster: cluster, surge: surge}
	measure := func(context.Context) (map[string]int, error) { return cluster, nil }
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		startReplicaWith(t, client, rec, Config{Identity: id, Buckets: 12, Measure: measure, WeightRefreshInterval: time.Millisecond})
	}
	settled := waitSettledRing(t, client, ids)
	stop := watchOwners(t, client)
	for r := int64(1); r <= 3; r++ {
		round.Store(r)
		time.Sleep(10 * fastDurations.RetryPeriod / 4) // several reconciles, each free to refresh the weights
		round.Store(0)
		time.Sleep(fastDurations.RetryPeriod)
	}
	if got := stop(); len(got) > 0 {
		t.Errorf("during the rollouts: %v", got)
	}
	after := ringIn(t, client)
	for i, b := range after.Buckets {
		if b.Pods != settled.Buckets[i].Pods {
			t.Errorf("bucket %d weighs %d pods after the rollouts, %d before: the surge reached the ring", i, b.Pods, settled.Buckets[i].Pods)
		}
	}
	if !maps.Equal(after.Moves, settled.Moves) {
		t.Errorf("moves counted %v after the rollouts, %v before", after.Moves, settled.Moves)
	}
	if len(rec.violations) > 0 {
		t.Fatalf("SH-1 broken: %v", rec.violations[:min(5, len(rec.violations))])
	}
}

// waitSettledRing waits until every bucket is owned by one of ids, each owns one at least, none is being
// released, and the plan has no move left; it returns the ring.
func waitSettledRing(t *testing.T, client *fake.Clientset, ids []string) Ring {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), DefaultRingName, metav1.GetOptions{})
		if err == nil {
			ring, err := DecodeRing(cm)
			if err == nil && settledOver(ring, ids) {
				return ring
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ring did not settle over %v: %v", ids, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func settledOver(ring Ring, ids []string) bool {
	owned := map[string]bool{}
	for _, b := range ring.Buckets {
		if b.ReleasingTo != "" || !slices.Contains(ids, b.Owner) {
			return false
		}
		owned[b.Owner] = true
	}
	return len(owned) == len(ids) && Next(ring, ids, time.Now()) == Move{}
}

// watchOwners watches the ring and records every owner change and re-split until stop, which returns them.
func watchOwners(t *testing.T, client *fake.Clientset) (stop func() []string) {
	t.Helper()
	w, err := client.CoreV1().ConfigMaps("kube-system").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		var got []string
		last := ringIn(t, client)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*v1.ConfigMap)
			if !ok {
				continue
			}
			ring, err := DecodeRing(cm)
			if err != nil {
				got = append(got, err.Error())
				continue
			}
			got = append(got, ownerChanges(last, ring)...)
			last = ring
		}
		done <- got
	}()
	return func() []string { w.Stop(); return <-done }
}

// ownerChanges describes what changed from before to after: each bucket's owner, and a re-split asked for.
func ownerChanges(before, after Ring) []string {
	var out []string
	if after.Resplitting() && !before.Resplitting() {
		out = append(out, "a re-split")
	}
	for i, b := range after.Buckets {
		if i < len(before.Buckets) && before.Buckets[i].Owner != b.Owner {
			out = append(out, fmt.Sprintf("bucket %d: %q → %q", i, before.Buckets[i].Owner, b.Owner))
		}
	}
	return out
}

// TestSettledRingStaysPut is SH-8 on the plan alone: a ring settled over three replicas that joined long ago
// stays put as time passes (past any RebalanceInterval), whatever LastRebalance says.
func TestSettledRingStaysPut(t *testing.T) {
	cluster := issueCluster(1)
	ring := NewRing(Bounds(cluster, 12), cluster)
	ids := []string{"a", "b", "c"}
	start := time.Unix(1_000_000, 0)
	ring = withMembers(ring, start, ids...)
	for m := Next(ring, ids, start); m.Kind != NoMove; m = Next(ring, ids, start) {
		ring.Buckets[m.Bucket].Owner = m.To
	}
	settled := ring.Clone()
	for at := start; at.Before(start.Add(4 * RebalanceInterval)); at = at.Add(10 * time.Second) {
		if m := Next(ring, ids, at); m != (Move{}) {
			t.Fatalf("%s after the ring settled: %+v (loads %v)", at.Sub(start), m, loadsOf(ring, ids))
		}
	}
	if !slices.EqualFunc(ring.Buckets, settled.Buckets, func(a, b Bucket) bool { return a.Owner == b.Owner }) {
		t.Fatal("owners changed")
	}
}

// TestOneRebalancePerInterval is SH-8's rate: a ring that needs several rebalancing moves among replicas
// that joined long ago makes one, then the next RebalanceInterval later, and so on; a replica that joins in
// between gets its buckets at once.
func TestOneRebalancePerInterval(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	ring := withMembers(ringOf("a", "a", "a", "a", "a", "a", "b", "c"), start.Add(-time.Hour), "a", "b", "c")
	live := []string{"a", "b", "c"}
	var moves []string
	apply := func(at time.Time) {
		m := Next(ring, live, at)
		if m.Kind != Release {
			return
		}
		ring.Buckets[m.Bucket].Owner = m.To
		if m.Cause == MoveRebalance {
			ring.LastRebalance = &metav1.MicroTime{Time: at}
		}
		moves = append(moves, fmt.Sprintf("%s %s→%s %s", at.Sub(start), m.From, m.To, m.Cause))
	}
	for at := start; at.Before(start.Add(3 * RebalanceInterval)); at = at.Add(30 * time.Second) {
		if at.Equal(start.Add(RebalanceInterval + time.Minute)) {
			ring = withMembers(ring, at, "d")
			live = append(live, "d")
		}
		apply(at)
	}
	want := []string{"0s a→b rebalance", "5m0s a→c rebalance", "6m0s a→d joined", "6m30s a→d joined"}
	if !slices.Equal(moves, want) {
		t.Fatalf("moves %q, want %q", moves, want)
	}
}
