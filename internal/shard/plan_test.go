package shard

import (
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
)

// TestHashIsTheServers checks Hash and Range against the API server's own matcher (SH-1): a namespace is in a
// range exactly when sharding's selector for that range's bounds matches it.
func TestHashIsTheServers(t *testing.T) {
	ranges := Bounds(sequential("ns-%03d", 120, 80), 7)
	for i := range 120 {
		ns := fmt.Sprintf("ns-%03d", i)
		for _, r := range ranges {
			sel := sharding.NewSelector(sharding.ShardRangeRequirement{Key: NamespaceField, Start: r.StartHex(), End: r.EndHex()})
			hash := "0x" + sharding.HashField(ns)
			server := !sharding.HexLess(hash, sel.Requirements()[0].Start) && sharding.HexLess(hash, sel.Requirements()[0].End)
			if got := r.Contains(ns); got != server {
				t.Fatalf("%s in %v: ours %v, the server's %v", ns, r, got, server)
			}
		}
	}
}

func sequential(format string, n, pods int) map[string]int {
	m := map[string]int{}
	for i := range n {
		m[fmt.Sprintf(format, i+1)] = pods
	}
	return m
}

// TestBoundsFollowTheNamespaces is SH-5's reason for weighted bounds: 1,000 sequential namespaces split into 4
// equal-width ranges are badly unbalanced (the issue measured 0, 100, 500 and 400), while Bounds' ranges each
// hold a quarter of the pods, give or take one namespace.
func TestBoundsFollowTheNamespaces(t *testing.T) {
	pods := sequential("ns-%d", 1000, 10)
	equal := make([]Range, 4)
	for i := range equal {
		equal[i] = Range{Start: uint64(i) << 62, Last: uint64(i)<<62 + (1<<62 - 1)}
	}
	if counts := countIn(equal, pods); counts[0] != 0 {
		t.Fatalf("equal-width ranges hold %v namespaces: the premise (0 in the first) no longer holds", counts)
	}
	for _, n := range []int{1, 2, 3, 4, 16, 32} {
		ranges := Bounds(pods, n)
		if len(ranges) != n {
			t.Fatalf("Bounds(_, %d) = %d ranges", n, len(ranges))
		}
		checkCover(t, ranges)
		for i, c := range countIn(ranges, pods) {
			if want := 1000 / n; abs(c-want) > 1 {
				t.Errorf("n=%d: range %d holds %d namespaces, want %d±1", n, i, c, want)
			}
		}
	}
}

// TestBoundsEdgeCases: no namespaces, fewer namespaces than ranges, one huge namespace.
func TestBoundsEdgeCases(t *testing.T) {
	for name, pods := range map[string]map[string]int{
		"empty":         {},
		"fewer":         {"a": 1, "b": 2},
		"one huge":      {"big": 10000, "a": 1, "b": 1, "c": 1},
		"negative pods": {"a": -5, "b": 3},
	} {
		t.Run(name, func(t *testing.T) {
			ranges := Bounds(pods, 8)
			if len(ranges) != 8 {
				t.Fatalf("%d ranges, want 8", len(ranges))
			}
			checkCover(t, ranges)
		})
	}
}

func checkCover(t *testing.T, ranges []Range) {
	t.Helper()
	next := uint64(0)
	for i, r := range ranges {
		if r.Start != next || r.Last < r.Start {
			t.Fatalf("range %d %v does not follow on from %#x", i, r, next)
		}
		next = r.Last + 1
	}
	if ranges[len(ranges)-1].Last != math.MaxUint64 {
		t.Fatalf("last range ends at %#x", ranges[len(ranges)-1].Last)
	}
}

func countIn(ranges []Range, pods map[string]int) []int {
	counts := make([]int, len(ranges))
	for ns := range pods {
		for i, r := range ranges {
			if r.Contains(ns) {
				counts[i]++
			}
		}
	}
	return counts
}

func ringOf(owners ...string) Ring {
	ring := NewRing(Bounds(nil, len(owners)), nil)
	for i, o := range owners {
		ring.Buckets[i].Owner = o
		ring.Buckets[i].Pods = 100
	}
	return ring
}

// planNow is the time the plan tests ask Next at: rings without members count every replica as joining.
var planNow = time.Unix(1_000_000, 0)

// TestNext is SH-5/SH-7/SH-8's plan as a table.
func TestNext(t *testing.T) {
	settled := func(r Ring) Ring { return withMembers(r, planNow.Add(-time.Hour), "a", "b", "c") }
	for _, tc := range []struct {
		name string
		ring Ring
		live []string
		want Move
	}{
		{"no replica", ringOf("", ""), nil, Move{}},
		{"a new ring's bucket is taken", ringOf("a", "", "a"), []string{"a", "b"}, Move{Kind: Take, Bucket: 1, To: "b", Cause: MoveInitial}},
		{"a dead owner's bucket is taken", ringOf("a", "dead", "b"), []string{"a", "b"}, Move{Kind: Take, Bucket: 1, From: "dead", To: "a", Cause: MoveLeft}},
		{"a released bucket is taken", func() Ring { r := ringOf("a", "", "b"); r.Buckets[1].Claims = 3; return r }(), []string{"a", "b"},
			Move{Kind: Take, Bucket: 1, To: "a", Cause: MoveLeft}},
		{"a re-split's bucket is taken", func() Ring {
			r := ringOf("a", "", "b")
			r.Buckets[1].UnownedSince = &metav1.MicroTime{Time: planNow}
			return r
		}(), []string{"a", "b"}, Move{Kind: Take, Bucket: 1, To: "a", Cause: MoveResplit}},
		{"balanced stays", ringOf("a", "b", "a", "b"), []string{"a", "b"}, Move{}},
		{"off by one bucket of three stays", ringOf("a", "b", "a"), []string{"a", "b"}, Move{}},
		{"a new replica gets one", ringOf("a", "a", "b", "b"), []string{"a", "b", "c"}, Move{Kind: Release, Bucket: 0, From: "a", To: "c", Cause: MoveJoined}},
		{"old members rebalance", settled(ringOf("a", "a", "a", "b")), []string{"a", "b"}, Move{Kind: Release, Bucket: 0, From: "a", To: "b", Cause: MoveRebalance}},
		{"one rebalance per interval", func() Ring {
			r := settled(ringOf("a", "a", "a", "b"))
			r.LastRebalance = &metav1.MicroTime{Time: planNow.Add(-RebalanceInterval + time.Second)}
			return r
		}(), []string{"a", "b"}, Move{}},
		{"a rebalance due again", func() Ring {
			r := settled(ringOf("a", "a", "a", "b"))
			r.LastRebalance = &metav1.MicroTime{Time: planNow.Add(-RebalanceInterval)}
			return r
		}(), []string{"a", "b"}, Move{Kind: Release, Bucket: 0, From: "a", To: "b", Cause: MoveRebalance}},
		{"a joiner is not held by the interval", func() Ring {
			r := withMembers(ringOf("a", "a", "b", "b", "a", "b"), planNow.Add(-time.Hour), "a", "b")
			r.LastRebalance = &metav1.MicroTime{Time: planNow}
			return withMembers(r, planNow.Add(-time.Minute), "c")
		}(), []string{"a", "b", "c"}, Move{Kind: Release, Bucket: 0, From: "a", To: "c", Cause: MoveJoined}},
		{"a joiner that is not the least loaded", func() Ring {
			r := withMembers(ringOf("a", "a", "a", "a", "b", "c", "c"), planNow.Add(-time.Hour), "a", "b")
			r.Buckets[4].Pods = 0
			r.LastRebalance = &metav1.MicroTime{Time: planNow}
			return withMembers(r, planNow.Add(-time.Minute), "c")
		}(), []string{"a", "b", "c"}, Move{Kind: Release, Bucket: 0, From: "a", To: "c", Cause: MoveJoined}},
		{"one release at a time", func() Ring { r := ringOf("a", "a", "a", "a"); r.Buckets[0].ReleasingTo = "b"; return r }(), []string{"a", "b"}, Move{}},
		{"takes go on during a release", func() Ring { r := ringOf("a", "a", "", "a"); r.Buckets[0].ReleasingTo = "b"; return r }(), []string{"a", "b"},
			Move{Kind: Take, Bucket: 2, To: "b", Cause: MoveInitial}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.ring, tc.live, planNow); got != tc.want {
				t.Fatalf("Next = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// withMembers returns ring with the identities as members that joined at joined.
func withMembers(ring Ring, joined time.Time, ids ...string) Ring {
	ring = ring.Clone()
	for _, id := range ids {
		ring.Members = append(ring.Members, Member{Identity: id, Joined: metav1.MicroTime{Time: joined}})
	}
	return ring
}

// TestNextConverges plays the plan out (every move applied at once) for replicas coming and going, and checks
// that it settles within the spread SH-5 allows and moves no more buckets than needed.
func TestNextConverges(t *testing.T) {
	ring := NewRing(Bounds(sequential("ns-%03d", 120, 83), 16), sequential("ns-%03d", 120, 83))
	steps := []struct {
		live     []string
		maxMoves int
	}{
		{[]string{"r1"}, 16},
		{[]string{"r1", "r2", "r3"}, 11},
		{[]string{"r1", "r2"}, 6},
		{[]string{"r1", "r2", "r3", "r4"}, 8},
	}
	for _, st := range steps {
		moves := 0
		for m := Next(ring, st.live, planNow); m.Kind != NoMove; m = Next(ring, st.live, planNow) {
			ring.Buckets[m.Bucket].Owner = m.To
			if moves++; moves > 40 {
				t.Fatalf("live %v: no end to the moves", st.live)
			}
		}
		if moves > st.maxMoves {
			t.Errorf("live %v: %d moves, want at most %d", st.live, moves, st.maxMoves)
		}
		loads := loadsOf(ring, st.live)
		mean := float64(loadsTotal(loads)) / float64(len(loads))
		for id, l := range loads {
			if float64(l) > 1.25*mean {
				t.Errorf("live %v: %s holds %d, more than 1.25× the mean %.0f (%v)", st.live, id, l, mean, loads)
			}
		}
	}
}

func loadsTotal(loads map[string]int) int {
	total := 0
	for _, l := range loads {
		total += l
	}
	return total
}
