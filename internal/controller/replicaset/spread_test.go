package replicaset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

const zoneKey = "topology.kubernetes.io/zone"

// testNodes is a cluster of six nodes in three zones (n-a1, n-a2 in zone a,
// …), a node without the zone label (bare) and a node "gone" that the cache
// does not know.
func testNodes(name string) (map[string]string, bool) {
	if name == "bare" {
		return map[string]string{"kubernetes.io/hostname": name}, true
	}
	if !strings.HasPrefix(name, "n-") || len(name) != 4 {
		return nil, false
	}
	return map[string]string{zoneKey: "zone-" + name[2:3], "kubernetes.io/hostname": name}, true
}

func zoneSpread() *spread { return &spread{keys: []string{zoneKey}, nodes: testNodes} }

// zoneCounts returns the active assigned pods of all, minus victims, per zone
// (testNodes' zones a, b, c always listed).
func zoneCounts(all, victims []*v1.Pod) map[string]int {
	out := map[string]int{"zone-a": 0, "zone-b": 0, "zone-c": 0}
	sp := zoneSpread()
	for _, p := range all {
		if slices.Contains(victims, p) || !isPodActive(p) || p.Spec.NodeName == "" {
			continue
		}
		out[sp.domains(p)[0]]++
	}
	return out
}

func skewOf(counts map[string]int) int {
	lo, hi := -1, 0
	for _, n := range counts {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - max(lo, 0)
}

func TestSpreadKeys(t *testing.T) {
	withConstraints := func(keys ...string) *appsv1.ReplicaSet {
		rs := testRS(3)
		rs.Annotations = map[string]string{rolloutstate.ScaleDownSpreadAnnotation: "template"}
		for _, k := range keys {
			rs.Spec.Template.Spec.TopologySpreadConstraints = append(rs.Spec.Template.Spec.TopologySpreadConstraints,
				v1.TopologySpreadConstraint{TopologyKey: k, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule})
		}
		return rs
	}
	annotated := func(v string) *appsv1.ReplicaSet {
		rs := testRS(3)
		rs.Annotations = map[string]string{rolloutstate.ScaleDownSpreadAnnotation: v}
		return rs
	}
	cases := []struct {
		name    string
		rs      *appsv1.ReplicaSet
		want    []string
		wantErr string
	}{
		{"no annotation: upstream's ranking", testRS(3), nil, ""},
		{"empty value: upstream's ranking", annotated(""), nil, ""},
		{"a label key", annotated(zoneKey), []string{zoneKey}, ""},
		{"template: its keys in order, once each", withConstraints(zoneKey, "kubernetes.io/hostname", zoneKey), []string{zoneKey, "kubernetes.io/hostname"}, ""},
		{"template without constraints", withConstraints(), nil, "has no topologySpreadConstraints"},
		{"not a label key", annotated("zone please"), nil, `"zone please" is neither a node label key nor "template"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rolloutstate.ScaleDownSpreadKeys(tc.rs.Annotations, &tc.rs.Spec.Template)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("spreadKeys = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestPodsToDeleteSpread is EX-4 on hand-made layouts.
func TestPodsToDeleteSpread(t *testing.T) {
	ready := readySince(testNow.Add(-time.Hour))
	// nine ready pods, three per zone, one per node, the newest in zone a then b (upstream takes those first).
	nine := func() []*v1.Pod {
		var pods []*v1.Pod
		for i, node := range []string{"n-a1", "n-a2", "n-a3", "n-b1", "n-b2", "n-b3", "n-c1", "n-c2", "n-c3"} {
			pods = append(pods, newPod(fmt.Sprintf("p%d", i), onNode(node), ready, created(testNow.Add(-time.Duration(i+1)*time.Minute))))
		}
		return pods
	}

	testSpreadZones(t, ready, nine)
	testSpreadTies(t, ready, nine)
}

// testSpreadZones holds TestPodsToDeleteSpread's zone-balance subtests (EX-4).
func testSpreadZones(t *testing.T, ready podOpt, nine func() []*v1.Pod) {
	t.Helper()
	t.Run("9 to 4 to 2 keeps the zones within one", func(t *testing.T) {
		pods := nine()
		victims := podsToDelete(pods, pods, 5, testNow, zoneSpread())
		if c := zoneCounts(pods, victims); skewOf(c) > 1 {
			t.Fatalf("after 9→4: %v", c)
		}
		upstream := podsToDelete(pods, pods, 5, testNow, nil)
		if c := zoneCounts(pods, upstream); skewOf(c) <= 1 {
			t.Fatalf("the layout does not tell EX-4 from upstream: upstream left %v", c)
		}
		var left []*v1.Pod
		for _, p := range pods {
			if !slices.Contains(victims, p) {
				left = append(left, p)
			}
		}
		victims = podsToDelete(left, left, 2, testNow, zoneSpread())
		if c := zoneCounts(left, victims); skewOf(c) > 1 {
			t.Fatalf("after 4→2: %v", c)
		}
	})

	t.Run("the other ReplicaSets' pods count", func(t *testing.T) {
		// The shrinking old ReplicaSet has one pod per zone; the new one has two in zone a.
		old := []*v1.Pod{newPod("old-a", onNode("n-a1"), ready), newPod("old-b", onNode("n-b1"), ready), newPod("old-c", onNode("n-c1"), ready, created(testNow.Add(-time.Minute)))}
		related := append(slices.Clone(old), newPod("new-a1", onNode("n-a1"), ready), newPod("new-a2", onNode("n-a2"), ready))
		got := podsToDelete(old, related, 1, testNow, zoneSpread())
		if len(got) != 1 || got[0].Name != "old-a" {
			t.Fatalf("victims %v, want old-a (zone a holds 3 of the Deployment's pods)", names(got))
		}
	})

	t.Run("between equally crowded zones, the one with more of this ReplicaSet's pods", func(t *testing.T) {
		// Mid-rollout: each zone holds 3 of the Deployment's pods; the old ReplicaSet has 2 in zone c, 1 in a and b.
		old := []*v1.Pod{newPod("old-a", onNode("n-a1"), ready), newPod("old-b", onNode("n-b1"), ready),
			newPod("old-c1", onNode("n-c1"), ready, created(testNow.Add(-time.Hour))), newPod("old-c2", onNode("n-c2"), ready, created(testNow.Add(-time.Hour)))}
		related := slices.Clone(old)
		for _, node := range []string{"n-a1", "n-a2", "n-b1", "n-b2", "n-c1"} {
			related = append(related, newPod("new-"+node, onNode(node), ready))
		}
		got := podsToDelete(old, related, 1, testNow, zoneSpread())
		if len(got) != 1 || !strings.HasPrefix(got[0].Name, "old-c") {
			t.Fatalf("victims %v, want one of zone c's old pods", names(got))
		}
	})
}

// testSpreadTies holds TestPodsToDeleteSpread's precedence and tie subtests (EX-4).
func testSpreadTies(t *testing.T, ready podOpt, nine func() []*v1.Pod) {
	t.Helper()
	t.Run("higher RS-14 keys still win", func(t *testing.T) {
		pods := nine()
		pods[7].Status.Conditions = nil // p7 in zone c is not ready
		got := podsToDelete(pods, pods, 1, testNow, zoneSpread())
		if len(got) != 1 || got[0].Name != "p7" {
			t.Fatalf("victims %v, want the not-ready p7", names(got))
		}
		got = podsToDelete(pods, pods, 3, testNow, zoneSpread())
		if c := zoneCounts(pods, got); !slices.Contains(got, pods[7]) || skewOf(c) > 1 {
			t.Fatalf("victims %v leave %v; want p7 and one pod each from zones a and b", names(got), c)
		}
	})

	t.Run("equally crowded zones fall back to RS-14's order", func(t *testing.T) {
		pods := nine()
		got := podsToDelete(pods, pods, 1, testNow, zoneSpread())
		want := podsToDelete(pods, pods, 1, testNow, nil)
		if !slices.Equal(names(got), names(want)) {
			t.Fatalf("victims %v, want upstream's %v", names(got), names(want))
		}
	})

	t.Run("nodes without the key and unknown nodes are one domain", func(t *testing.T) {
		pods := []*v1.Pod{
			newPod("bare", onNode("bare"), ready), newPod("gone", onNode("gone"), ready),
			newPod("a", onNode("n-a1"), ready, created(testNow.Add(-time.Minute))),
		}
		got := podsToDelete(pods, pods, 1, testNow, zoneSpread())
		if len(got) != 1 || got[0].Name == "a" {
			t.Fatalf("victims %v, want one of the two pods without a zone", names(got))
		}
	})

	t.Run("a second key breaks ties of the first", func(t *testing.T) {
		// Zones a and b hold two pods each; zone a's are on one node.
		pods := []*v1.Pod{
			newPod("b1", onNode("n-b1"), ready), newPod("b2", onNode("n-b2"), ready),
			newPod("a1", onNode("n-a1"), ready, created(testNow.Add(-time.Minute))), newPod("a1bis", onNode("n-a1"), ready, created(testNow.Add(-2*time.Minute))),
		}
		sp := &spread{keys: []string{zoneKey, "kubernetes.io/hostname"}, nodes: testNodes}
		got := podsToDelete(pods, pods, 1, testNow, sp)
		if len(got) != 1 || !strings.HasPrefix(got[0].Name, "a1") {
			t.Fatalf("victims %v, want one from node n-a1", names(got))
		}
	})
}

// firstKeys is a pod's RS-14 rules 1-4 as one comparable value: smaller is deleted first.
func firstKeys(p *v1.Pod) [4]int {
	assigned := 0
	if p.Spec.NodeName != "" {
		assigned = 1
	}
	readiness := 0
	if isPodReady(p) {
		readiness = 1
	}
	return [4]int{assigned, phaseOrder(p.Status.Phase), readiness, int(podDeletionCost(p))}
}

func lessKeys(a, b [4]int) bool { return slices.Compare(a[:], b[:]) < 0 }

// TestPodsToDeleteSpreadProperties checks EX-4 on random layouts, readiness and deletion costs: the victims
// never break RS-14's first keys (no pod kept that ranks strictly before a victim on them), and the skew
// across zones after the scale-down is the smallest of all choices among the tied pods (found by trying
// every subset).
func TestPodsToDeleteSpreadProperties(t *testing.T) {
	nodes := []string{"n-a1", "n-a2", "n-b1", "n-b2", "n-c1", "bare", ""}
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 26))
		var pods, related []*v1.Pod
		n := 1 + r.IntN(12)
		for i := range n + r.IntN(6) {
			opts := []podOpt{onNode(nodes[r.IntN(len(nodes))]), created(testNow.Add(-time.Duration(r.IntN(5000)) * time.Second))}
			if r.IntN(4) > 0 {
				opts = append(opts, readySince(testNow.Add(-time.Duration(r.IntN(5000))*time.Second)))
			}
			if r.IntN(5) == 0 {
				opts = append(opts, phase(v1.PodPending))
			}
			if r.IntN(5) == 0 {
				opts = append(opts, cost(fmt.Sprint(r.IntN(3)-1)))
			}
			p := newPod(fmt.Sprintf("p%02d", i), opts...)
			if i < n {
				pods = append(pods, p)
			}
			related = append(related, p)
		}
		diff := 1 + r.IntN(len(pods))
		if diff >= len(pods) {
			diff = len(pods) - 1
		}
		if diff == 0 {
			continue
		}
		victims := podsToDelete(pods, related, diff, testNow, zoneSpread())
		desc := fmt.Sprintf("seed %d: pods %v, related %d, diff %d, victims %v", seed, describe(pods), len(related), diff, names(victims))
		if len(victims) != diff {
			t.Fatalf("%s: %d victims", desc, len(victims))
		}
		for _, kept := range pods {
			for _, v := range victims {
				if !slices.Contains(victims, kept) && lessKeys(firstKeys(kept), firstKeys(v)) {
					t.Fatalf("%s: kept %s ranks before victim %s on RS-14's first keys", desc, kept.Name, v.Name)
				}
			}
		}
		if got, best := zoneSkew(related, victims), bestSkew(pods, related, diff); got != best {
			t.Fatalf("%s: skew %d, but %d is possible", desc, got, best)
		}
	}
}

func describe(pods []*v1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s@%s%v ", p.Name, p.Spec.NodeName, firstKeys(p))
	}
	return b.String()
}

// zoneSkew is max − min pods per domain (zones a-c and the no-key domain, as EX-4 counts them) of the
// active assigned pods of related that are not victims, over the domains related had pods in.
func zoneSkew(related, victims []*v1.Pod) int {
	sp := zoneSpread()
	counts := map[string]int{}
	for _, p := range related {
		if isPodActive(p) && p.Spec.NodeName != "" {
			counts[sp.domains(p)[0]] += 0
			if !slices.Contains(victims, p) {
				counts[sp.domains(p)[0]]++
			}
		}
	}
	return skewOf(counts)
}

// bestSkew tries every choice of diff victims that respects RS-14's first keys (whole groups of pods that
// rank strictly before the rest, any subset of the group where diff runs out) and returns the smallest skew.
func bestSkew(pods, related []*v1.Pod, diff int) int {
	sorted := slices.Clone(pods)
	sort.SliceStable(sorted, func(i, j int) bool { return lessKeys(firstKeys(sorted[i]), firstKeys(sorted[j])) })
	cut := firstKeys(sorted[diff-1])
	var forced, tied []*v1.Pod
	for _, p := range sorted {
		switch k := firstKeys(p); {
		case lessKeys(k, cut):
			forced = append(forced, p)
		case k == cut:
			tied = append(tied, p)
		}
	}
	need := diff - len(forced)
	best := -1
	for mask := 0; mask < 1<<len(tied); mask++ {
		var chosen []*v1.Pod
		for i, p := range tied {
			if mask&(1<<i) != 0 {
				chosen = append(chosen, p)
			}
		}
		if len(chosen) != need {
			continue
		}
		if s := zoneSkew(related, slices.Concat(forced, chosen)); best < 0 || s < best {
			best = s
		}
	}
	return best
}

// TestSyncScaleDownSpread drives the sync: a ReplicaSet annotated with EX-4 and a node informer deletes the
// pods that keep the zones even, and an invalid value gets a Warning event and the default ranking.
func TestSyncScaleDownSpread(t *testing.T) {
	for _, tc := range []struct {
		name, value, wantEvent string
		wantSkew               int
	}{
		{"zone key", zoneKey, "", 1},
		{"invalid value", "zone please", "Warning InvalidScaleDownSpread", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := testRS(4)
			rs.Annotations = map[string]string{rolloutstate.ScaleDownSpreadAnnotation: tc.value}
			objs := []runtime.Object{rs}
			for i, node := range []string{"n-a1", "n-a2", "n-a1", "n-b1", "n-b2", "n-b1", "n-c1", "n-c2", "n-c1"} {
				objs = append(objs, newPod(fmt.Sprintf("p%d", i), onNode(node), ownedBy(rs), withLabels(rs.Spec.Selector.MatchLabels),
					readySince(testNow.Add(-time.Hour)), created(testNow.Add(-time.Duration(i+1)*time.Minute))))
			}
			for _, name := range []string{"n-a1", "n-a2", "n-b1", "n-b2", "n-c1", "n-c2"} {
				labels, _ := testNodes(name)
				objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
			}
			f := newSpreadFixture(t, objs...)
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, p := range f.pods() {
				labels, _ := testNodes(p.Spec.NodeName)
				counts[labels[zoneKey]]++
			}
			if skewOf(counts) != tc.wantSkew {
				t.Errorf("pods per zone after the sync: %v, want skew %d", counts, tc.wantSkew)
			}
			events := f.Events()
			if tc.wantEvent != "" && countPrefix(events, tc.wantEvent) != 1 {
				t.Errorf("events %v, want one %q", events, tc.wantEvent)
			}
			if tc.wantEvent == "" && countPrefix(events, "Warning") != 0 {
				t.Errorf("events %v, want no warning", events)
			}
		})
	}
}
