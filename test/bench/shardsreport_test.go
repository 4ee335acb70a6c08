package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
)

func TestNewShardWorkloadSpreadsPodsOverSequentialNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name             string
		pods, namespaces int
		first, last      int32
		lastName         string
	}{
		{name: "issue 35's scale", pods: 10000, namespaces: 120, first: 84, last: 83, lastName: "ns-120"},
		{name: "the small run", pods: 1000, namespaces: 24, first: 42, last: 41, lastName: "ns-024"},
		{name: "even", pods: 100, namespaces: 4, first: 25, last: 25, lastName: "ns-004"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newShardWorkload(tc.pods, tc.namespaces)
			if len(w) != tc.namespaces || w.pods() != tc.pods {
				t.Fatalf("%d namespaces, %d pods; want %d, %d", len(w), w.pods(), tc.namespaces, tc.pods)
			}
			if w["ns-001"] != tc.first || w[tc.lastName] != tc.last {
				t.Fatalf("ns-001 %d, %s %d; want %d, %d", w["ns-001"], tc.lastName, w[tc.lastName], tc.first, tc.last)
			}
		})
	}
}

func TestShardWorkloadPeakAddsEachDeploymentsSurge(t *testing.T) {
	// 25% maxSurge rounds up: 84 → 21, 83 → 21, 1 → 1.
	w := shardWorkload{"ns-001": 84, "ns-002": 83, "ns-003": 1}
	if got := w.peak(); got != 84+21+83+21+1+1 {
		t.Fatalf("peak = %d; want %d", got, 84+21+83+21+1+1)
	}
}

func TestSideBalance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owned []int
		want  float64
	}{
		{name: "one replica", owned: []int{10000}, want: 1},
		{name: "even", owned: []int{500, 500}, want: 1},
		{name: "uneven", owned: []int{4000, 3000, 3000}, want: 1.2},
		{name: "none owned", owned: []int{0, 0}, want: math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r sideResult
			for _, n := range tc.owned {
				r.Replicas = append(r.Replicas, replicaResult{CachedPods: n})
			}
			got := r.balance()
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
				t.Fatalf("balance = %v; want %v", got, tc.want)
			}
		})
	}
}

// shardResults is one repetition: an unsharded side, a sharded one of two replicas, and the floor.
func shardResults() []sideResult {
	return []sideResult{
		{Side: "unsharded", RolloutSeconds: 100, ClusterCPUSeconds: 200, Replicas: []replicaResult{
			{Side: "unsharded", IdleHeapMB: 4, HeapMB: 54, RolloutCPUSeconds: 40, CachedPods: 1000},
		}},
		{Side: "sharded-2", RolloutSeconds: 105, ClusterCPUSeconds: 240, Replicas: []replicaResult{
			{Side: "sharded-2", Sharded: true, IdleHeapMB: 8, HeapMB: 28, RolloutCPUSeconds: 16, CachedPods: 400, OwnedPods: 450},
			{Side: "sharded-2", Replica: 1, Sharded: true, IdleHeapMB: 8, HeapMB: 38, RolloutCPUSeconds: 24, CachedPods: 600, OwnedPods: 650},
		}},
		{Side: "floor", RolloutSeconds: 90, ClusterCPUSeconds: 190, Replicas: []replicaResult{
			{Side: "floor", IdleHeapMB: 3, HeapMB: 30, RolloutCPUSeconds: 8, CachedPods: 1000},
		}},
	}
}

func TestShardRatiosTakeTheWorstReplicaAgainstTheUnsharded(t *testing.T) {
	got := shardRatios(shardResults())
	want := []ratioRow{
		{"sharded-2", "heap above idle ÷ unsharded's (worst replica)", 30.0 / 50, 0.4},
		{"sharded-2", "CPU during rollout ÷ unsharded's (worst replica)", 24.0 / 40, 0.45},
		{"sharded-2", "rollout time ÷ unsharded's", 1.05, 1.1},
		{"sharded-2", "cluster (API server) CPU ÷ unsharded's", 1.2, 1.15},
		{"sharded-2", "balance: biggest replica's pods ÷ mean", 1.2, 1.25},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows (%v); want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Side != want[i].Side || got[i].Name != want[i].Name || got[i].Want != want[i].Want ||
			math.Abs(got[i].Value-want[i].Value) > 1e-9 {
			t.Errorf("row %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if met := []bool{got[0].met(), got[1].met(), got[2].met(), got[3].met(), got[4].met()}; met[0] || met[1] || !met[2] || met[3] || !met[4] {
		t.Errorf("met = %v; want false, false, true, false, true", met)
	}
}

func TestShardRatiosNeedTheUnshardedSide(t *testing.T) {
	if got := shardRatios(shardResults()[1:]); got != nil {
		t.Fatalf("got %v without an unsharded side; want none", got)
	}
}

func TestMedianRatiosKeepTheFirstOrder(t *testing.T) {
	rows := []ratioRow{
		{"sharded-2", "a", 1, 2}, {"sharded-3", "a", 5, 2},
		{"sharded-2", "a", 3, 2}, {"sharded-3", "a", 7, 2},
		{"sharded-2", "a", 2, 2}, {"sharded-3", "a", 6, 2},
	}
	got := medianRatios(rows)
	if len(got) != 2 || got[0].Side != "sharded-2" || got[0].Value != 2 || got[1].Side != "sharded-3" || got[1].Value != 6 {
		t.Fatalf("medianRatios = %+v; want sharded-2 2, sharded-3 6", got)
	}
}

func TestPrintFloorComparesEveryReplicaWithTheFloor(t *testing.T) {
	var b bytes.Buffer
	printFloor(&b, shardResults())
	out := b.String()
	for _, want := range []string{"| unsharded | 0 | 40.0 | 8.0 | 5.00 |", "| sharded-2 | 1 | 24.0 | 8.0 | 3.00 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "| floor |") {
		t.Errorf("the floor compared with itself:\n%s", out)
	}
	b.Reset()
	printFloor(&b, shardResults()[:2])
	if b.Len() != 0 {
		t.Errorf("printed without a floor side:\n%s", b.String())
	}
}

func TestPrintSideHasAColumnPerReplica(t *testing.T) {
	var b bytes.Buffer
	printSide(&b, sideResult{Side: "sharded-2", Pods: 1000, Replicas: shardResults()[1].Replicas})
	out := b.String()
	for _, want := range []string{"| sharded-2 | replica 0 | replica 1 |", "| heap above idle (MB) | 20.0 | 30.0 |",
		"| pods share (cached ÷ the side's) | 0.400 | 0.600 |", "| owned pods (the ring's count) | 450 | 650 |", "balance (biggest ÷ mean pods): 1.200", "filtering: client-side only"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// TestPrintSideShowsSyncsButNotTheFloors checks the sync rows (issue 48: syncs beside writes): a controller
// replica's counts, and "–" for the floor, which runs no controller.
func TestPrintSideShowsSyncsButNotTheFloors(t *testing.T) {
	var b bytes.Buffer
	ours := shardResults()[0]
	ours.Replicas[0].ReplicaSetSyncs, ours.Replicas[0].DeploymentSyncs = 41000, 12000
	printSide(&b, ours)
	printSide(&b, shardResults()[2])
	out := b.String()
	for _, want := range []string{"| ReplicaSet syncs during rollout | 41000 |", "| Deployment syncs during rollout | 12000 |",
		"| ReplicaSet syncs during rollout | – |", "| Deployment syncs during rollout | – |"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestReadCharsCountsWhatTheProcessRead(t *testing.T) {
	before, err := readChars(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
	if after, err := readChars(os.Getpid()); err != nil || after <= before {
		t.Fatalf("rchar %d, then %d (%v); want it to grow", before, after, err)
	}
	if _, err := readChars(-1); err == nil {
		t.Fatalf("readChars of no process succeeded")
	}
}

// The idle baseline of a side is measured on the same processes as its rollout: with -shard-concurrency the idle
// replicas run the same --concurrent-*-syncs (an idle side built field by field once dropped it).
func TestIdleSideKeepsEveryFlagOfTheSide(t *testing.T) {
	s := shardSide{name: "sharded-3", replicas: 3, sharded: true, concurrency: 9}
	idle := idleSide(s)
	if idle.name != "idle-sharded-3" {
		t.Fatalf("idle side named %q, want idle-sharded-3", idle.name)
	}
	idle.name = s.name
	if idle != s {
		t.Fatalf("idle side %+v, want %+v but for its name", idle, s)
	}
	_, want := sideArgs(binaries{kubedeploy: "kubedeploy", controllers: "kubedeploy"}, s, "kc", "ring", 1)
	_, got := sideArgs(binaries{kubedeploy: "kubedeploy", controllers: "kubedeploy"}, idleSide(s), "kc", "ring", 1)
	if strings.Join(got, " ") != strings.Join(want, " ") || !strings.Contains(strings.Join(got, " "), "--concurrent-replicaset-syncs=9") {
		t.Fatalf("idle side's command line %q, want the side's %q, with --concurrent-replicaset-syncs=9", got, want)
	}
}
