package replicaset

// Fuzz targets: properties of the RS-14 scale-down ordering, the RS-12/RS-13
// counting math, and one "bad input never crashes a sync" target. Run them
// with .ci/fuzz; `go test` runs only their seed corpus.

import (
	"fmt"
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// ---------------------------------------------------------------------------
// Decoding fuzz bytes into pods.

// podBytes is how many fuzz bytes fuzzPod reads.
const podBytes = 7

// deletionCosts are the pod-deletion-cost annotation values fuzzPod picks
// from (OM-9): valid, invalid (leading "+", leading zeros, out of range, not
// a number) and absent ("").
var deletionCosts = []string{"", "0", "5", "-3", "+5", "007", "abc", "2147483648", "-2147483648", "2147483647", "10"}

// fuzzTime is 0 → the zero time, 1..199 → that many minutes ago, 200..255
// → in the future (clock skew): a small domain, so equal timestamps and
// equal log2 buckets (RS-14 rules 6 and 8) are common.
func fuzzTime(b byte) time.Time {
	switch {
	case b == 0:
		return time.Time{}
	case b >= 200:
		return testNow.Add(time.Duration(b-199) * time.Minute)
	default:
		return testNow.Add(-time.Duration(b) * time.Minute)
	}
}

// fuzzPod decodes pod i from podBytes bytes: node ("" or one of three),
// phase and readiness, ready time, creation time, restarts (regular and
// sidecar), deletion cost, UID prefix. UIDs are unique (real ones are).
func fuzzPod(i int, b []byte) *v1.Pod {
	node := ""
	if b[0]%4 != 0 {
		node = fmt.Sprintf("node-%d", b[0]%4)
	}
	opts := []podOpt{
		onNode(node),
		phase([]v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodUnknown, "Weird"}[b[1]%4]),
		created(fuzzTime(b[3])),
		uid(fmt.Sprintf("%c-%d", 'a'+b[6]%3, i)),
	}
	if b[1]&4 != 0 {
		opts = append(opts, readySince(fuzzTime(b[2])))
	}
	if b[4]&3 != 0 {
		opts = append(opts, restarts(int32(b[4]&3)))
	}
	if b[4]>>2&3 != 0 {
		opts = append(opts, sidecarRestarts(int32(b[4]>>2&3)))
	}
	if c := deletionCosts[int(b[5])%len(deletionCosts)]; c != "" {
		opts = append(opts, cost(c))
	}
	return newPod(fmt.Sprintf("p%d", i), opts...)
}

// fuzzPods decodes up to limit pods.
func fuzzPods(data []byte, limit int) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; (i+1)*podBytes <= len(data) && i < limit; i++ {
		out = append(out, fuzzPod(i, data[i*podBytes:(i+1)*podBytes]))
	}
	return out
}

// podSeed encodes one pod for fuzzPod: node, phase (|4 ready), ready time,
// creation time, restarts, cost index, UID prefix.
func podSeed(node, phaseReady, ready, created, restarts, cost, uid byte) []byte {
	return []byte{node, phaseReady, ready, created, restarts, cost, uid}
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// sameTimeNearTime reports whether, among ps, two have the same non-zero
// time and a third a different one in the same floor(log2) age bucket.
// Rules 6 and 8 then disagree with themselves: equal times fall through to
// the next rule, same-bucket times are decided by UID, and the ordering is
// not transitive (TestRankedPodsLessLogScaleIntransitive).
func sameTimeNearTime(ps []*v1.Pod, at func(*v1.Pod) time.Time) bool {
	for i, a := range ps {
		for j, b := range ps {
			if i == j || at(a).IsZero() || !at(a).Equal(at(b)) {
				continue
			}
			for k, c := range ps {
				if k != i && k != j && !at(c).IsZero() && !at(c).Equal(at(a)) && logBucket(testNow.Sub(at(c))) == logBucket(testNow.Sub(at(a))) {
					return true
				}
			}
		}
	}
	return false
}

// knownIntransitive reports whether ps contains the log2-bucket pattern of
// sameTimeNearTime for ready times or creation times.
func knownIntransitive(ps ...*v1.Pod) bool {
	return sameTimeNearTime(ps, podReadyTime) || sameTimeNearTime(ps, func(p *v1.Pod) time.Time { return p.CreationTimestamp.Time })
}

// ---------------------------------------------------------------------------
// RS-14 ordering.

// describePods renders what RS-14 ranks each pod by, for failure messages.
func describePods(r []rankedPod) string {
	s := ""
	for _, x := range r {
		p := x.pod
		s += fmt.Sprintf("  %s uid=%s node=%q phase=%s ready=%v readyAt=%v created=%v restarts=%x cost=%d rank=%d\n", p.Name, p.UID, p.Spec.NodeName,
			p.Status.Phase, isPodReady(p), podReadyTime(p), p.CreationTimestamp.Time, maxRestarts(p), x.cost, x.rank)
	}
	return s
}

// TestRankedPodsLessLogScaleIntransitive documents a finding of
// FuzzPodsToDelete (skipped: it is the specified, upstream-identical
// behaviour). RS-14 rules 6 and 8 compare timestamps only when they differ,
// so two pods with the same timestamp fall through to the next rule, while a
// pod with another timestamp in the same log2 age bucket is ordered against
// both by UID alone. Creation timestamps have 1 s resolution, so this is
// common. Minimized by the fuzzer (rule 8): p0 and p2 created 48m ago, p1
// 49m ago (same bucket), UIDs a-0 < a-1 < a-2: p0 < p1 < p2 by UID but
// p0 ~ p2 (equal). With rule 6 and restarts it is a cycle: a = Ready 40m
// ago, 5 restarts, UID "c"; b = Ready 40m ago, UID "a"; c = Ready 50m ago,
// UID "b": a < b (restarts), b < c, c < a (UIDs). sort.Slice then gives an
// order, and podsToDelete a choice of victims, that depends on the input
// order. FuzzPodsToDelete exempts this pattern
// (knownIntransitive).
func TestRankedPodsLessLogScaleIntransitive(t *testing.T) {
	t.Skip("RS-14 as specified (upstream LogarithmicScaleDown): not a strict weak order; kept as a documented counterexample")
	p := func(name, u string, createdAgo time.Duration) rankedPod {
		return rankedPod{pod: newPod(name, uid(u), phase(v1.PodPending), onNode(""), created(testNow.Add(-createdAgo)))}
	}
	p0, p1, p2 := p("p0", "a-0", 48*time.Minute), p("p1", "a-1", 49*time.Minute), p("p2", "a-2", 48*time.Minute)
	if rankedPodsLess(p0, p1, testNow) && rankedPodsLess(p1, p2, testNow) && !rankedPodsLess(p0, p2, testNow) {
		t.Errorf("rule 8: p0 < p1 < p2 but not p0 < p2")
	}
	a := rankedPod{pod: newPod("a", uid("c"), readySince(testNow.Add(-40*time.Minute)), restarts(5))}
	b := rankedPod{pod: newPod("b", uid("a"), readySince(testNow.Add(-40*time.Minute)))}
	c := rankedPod{pod: newPod("c", uid("b"), readySince(testNow.Add(-50*time.Minute)))}
	if rankedPodsLess(a, b, testNow) && rankedPodsLess(b, c, testNow) && rankedPodsLess(c, a, testNow) {
		t.Errorf("rule 6: cycle a < b < c < a")
	}
}

// FuzzPodsToDelete checks RS-14 on up to 10 fuzzed pods with unique UIDs,
// ranks from ranksOnSameNode over related pods (the pods themselves plus
// fuzzed extra pods, active or not) and deletion costs parsed per OM-9.
// The ordering (rankedPodsLess, rules 1-9) is a strict weak order:
// irreflexive and asymmetric on every pair, transitive with transitive
// incomparability on every triple, except triples with the log2-bucket
// pattern of knownIntransitive (a known, upstream-identical violation,
// documented by TestRankedPodsLessLogScaleIntransitive). podsToDelete
// returns exactly min(diff, len(pods)) distinct pods, all drawn from the
// input, and when diff < len(pods) no pod left behind ranks before a
// returned one (checked when no triple has the known pattern).
func FuzzPodsToDelete(f *testing.F) {
	ready := byte(1 | 4)
	for _, seed := range []struct {
		pods  []byte
		diff  uint8
		extra []byte
	}{
		{concat(podSeed(1, ready, 60, 60, 0, 0, 0), podSeed(1, 1, 0, 60, 0, 0, 1), podSeed(0, 0, 0, 60, 0, 0, 2)), 2, nil},                       // unscheduled, then not ready
		{concat(podSeed(0, ready, 60, 60, 0, 0, 0), podSeed(1, 0, 0, 60, 0, 0, 1), podSeed(2, 2, 0, 60, 0, 0, 2)), 1, nil},                       // rules 1, 2
		{concat(podSeed(1, ready, 60, 60, 0, 0, 0), podSeed(1, 1, 0, 60, 0, 2, 1), podSeed(1, ready, 60, 60, 0, 3, 2)), 1, nil},                  // rules 3, 4
		{concat(podSeed(1, ready, 60, 60, 0, 0, 0), podSeed(2, ready, 60, 60, 0, 0, 1), podSeed(3, ready, 60, 60, 0, 0, 2)), 1, []byte{2, 2, 3}}, // rule 5: crowded node first
		{concat(podSeed(1, ready, 50, 9, 0, 0, 0), podSeed(1, ready, 40, 9, 0, 0, 1), podSeed(1, ready, 0, 9, 0, 0, 2)), 2, nil},                 // rule 6: same bucket, zero time
		{concat(podSeed(1, 1, 0, 5, 3, 0, 0), podSeed(1, 1, 0, 50, 1, 0, 1), podSeed(1, 1, 0, 50, 5, 0, 2)), 1, nil},                             // rules 7, 8, sidecars
		{concat(podSeed(1, 1, 0, 0, 0, 0, 0), podSeed(1, 1, 0, 210, 0, 0, 1), podSeed(1, 1, 0, 1, 0, 0, 2)), 2, nil},                             // rule 8: zero and future times
		{concat(podSeed(1, 1, 0, 7, 0, 6, 0), podSeed(1, 1, 0, 7, 0, 5, 1), podSeed(1, 1, 0, 7, 0, 9, 2)), 1, nil},                               // OM-9 invalid costs, rule 9 ties
		{concat(podSeed(1, ready, 60, 60, 0, 0, 0), podSeed(1, ready, 60, 60, 0, 0, 1)), 5, nil},                                                 // diff ≥ len
		{concat(podSeed(3, ready, 9, 9, 1, 1, 0), podSeed(3, ready, 20, 8, 0, 1, 1), podSeed(0, 2, 0, 9, 2, 4, 2)), 0, []byte{4, 7}},             // diff 0, inactive related pods
	} {
		f.Add(seed.pods, seed.diff, seed.extra)
	}
	f.Fuzz(fuzzPodsToDelete)
}

// fuzzPodsToDelete is FuzzPodsToDelete's body.
func fuzzPodsToDelete(t *testing.T, data []byte, diffIn uint8, extra []byte) {
	pods := fuzzPods(data, 10)
	related := append([]*v1.Pod(nil), pods...)
	for i, b := range extra {
		p := newPod(fmt.Sprintf("x%d", i), onNode(fmt.Sprintf("node-%d", b%4)), uid(fmt.Sprintf("x-%d", i)))
		if b%4 == 0 {
			p.Spec.NodeName = ""
		}
		if b&4 != 0 {
			p.Status.Phase = v1.PodSucceeded // not active: no rank
		}
		related = append(related, p)
	}
	ranks := ranksOnSameNode(pods, related)
	r := make([]rankedPod, len(pods))
	for i, p := range pods {
		r[i] = rankedPod{pod: p, rank: ranks[i], cost: podDeletionCost(p)}
	}
	orderOK := checkStrictWeakOrder(t, r)

	diff := int(diffIn) % (len(pods) + 3)
	out := podsToDelete(pods, related, diff, testNow, nil)
	if len(out) != min(diff, len(pods)) {
		t.Fatalf("RS-14: %d victims for diff %d of %d pods", len(out), diff, len(pods))
	}
	chosen := map[*v1.Pod]bool{}
	for _, p := range out {
		in := false
		for _, q := range pods {
			in = in || p == q
		}
		if !in || chosen[p] {
			t.Fatalf("RS-14: victim %s is not an input pod or is chosen twice", p.Name)
		}
		chosen[p] = true
	}
	if diff >= len(pods) || !orderOK {
		return
	}
	for i, kept := range pods {
		if chosen[kept] {
			continue
		}
		for j, victim := range pods {
			if chosen[victim] && rankedPodsLess(r[i], r[j], testNow) {
				t.Fatalf("RS-14: kept %s ranks before victim %s\n%s", kept.Name, victim.Name, describePods([]rankedPod{r[i], r[j]}))
			}
		}
	}
}

// checkStrictWeakOrder fails unless rankedPodsLess is irreflexive and
// asymmetric on every pair of r and transitive, with transitive
// incomparability, on every triple without the knownIntransitive pattern.
// It reports whether no triple had that pattern.
func checkStrictWeakOrder(t *testing.T, r []rankedPod) bool {
	t.Helper()
	less := func(a, b int) bool { return rankedPodsLess(r[a], r[b], testNow) }
	incomparable := func(a, b int) bool { return !less(a, b) && !less(b, a) }
	for a := range r {
		if less(a, a) {
			t.Fatalf("RS-14 not irreflexive: %s < itself", r[a].pod.Name)
		}
		for b := a + 1; b < len(r); b++ {
			if less(a, b) && less(b, a) {
				t.Fatalf("RS-14 not asymmetric: %s < %s < %s\n%s", r[a].pod.Name, r[b].pod.Name, r[a].pod.Name, describePods([]rankedPod{r[a], r[b]}))
			}
		}
	}
	clean := true
	for i := range r {
		for j := i + 1; j < len(r); j++ {
			for k := j + 1; k < len(r); k++ {
				if knownIntransitive(r[i].pod, r[j].pod, r[k].pod) {
					clean = false
					continue
				}
				for _, p := range [][3]int{{i, j, k}, {i, k, j}, {j, i, k}, {j, k, i}, {k, i, j}, {k, j, i}} {
					a, b, c := p[0], p[1], p[2]
					if less(a, b) && less(b, c) && !less(a, c) {
						t.Fatalf("RS-14 not transitive: %s < %s < %s but not %s < %s\n%s", r[a].pod.Name, r[b].pod.Name, r[c].pod.Name, r[a].pod.Name, r[c].pod.Name, describePods([]rankedPod{r[a], r[b], r[c]}))
					}
					if incomparable(a, b) && incomparable(b, c) && !incomparable(a, c) {
						t.Fatalf("RS-14 incomparability not transitive: %s ~ %s ~ %s but not %s ~ %s\n%s", r[a].pod.Name, r[b].pod.Name, r[c].pod.Name, r[a].pod.Name, r[c].pod.Name, describePods([]rankedPod{r[a], r[b], r[c]}))
					}
				}
			}
		}
	}
	return clean
}

// ---------------------------------------------------------------------------
// RS-12, RS-13 counting.

// FuzzReplicaCountMath checks RS-13's slowStartBatchSizes (batches are
// positive, sum to count, the first is min(count, initial) and each next is
// min(2 × previous, remaining), so never more than twice the previous) and
// RS-12's replicaDiff (|diff| ≤ burst, same sign as active − desired, and
// exact when within the burst).
func FuzzReplicaCountMath(f *testing.F) {
	f.Add(uint16(0), uint8(1), int32(0), int32(0), uint16(500))
	f.Add(uint16(1), uint8(1), int32(3), int32(0), uint16(500))
	f.Add(uint16(10), uint8(1), int32(0), int32(10), uint16(500))  // 1, 2, 4, 3
	f.Add(uint16(7), uint8(3), int32(1000), int32(1), uint16(500)) // clamped to the burst
	f.Add(uint16(500), uint8(1), int32(0), int32(math.MaxInt32), uint16(500))
	f.Add(uint16(1023), uint8(16), int32(5), int32(5), uint16(0))
	f.Fuzz(func(t *testing.T, count uint16, initialIn uint8, active, desired int32, burstIn uint16) {
		initial := 1 + int(initialIn)%32 // SlowStartInitialBatchSize ≥ 1 (CM-8: 1)
		sizes := slowStartBatchSizes(int(count), initial)
		sum := 0
		for i, s := range sizes {
			want := min(int(count), initial)
			if i > 0 {
				want = min(2*sizes[i-1], int(count)-sum)
			}
			if s <= 0 || s != want {
				t.Fatalf("RS-13 slowStartBatchSizes(%d, %d) = %v: batch %d is %d, want %d", count, initial, sizes, i, s, want)
			}
			sum += s
		}
		if sum != int(count) {
			t.Fatalf("RS-13 slowStartBatchSizes(%d, %d) = %v sums to %d", count, initial, sizes, sum)
		}

		burst := int(burstIn)
		a, d := int(active), int(desired)
		diff := replicaDiff(a, d, burst)
		raw := a - d
		switch {
		case diff > burst || diff < -burst:
			t.Fatalf("RS-12 replicaDiff(%d, %d, %d) = %d beyond the burst", a, d, burst, diff)
		case (diff > 0) != (raw > 0 && burst > 0) || (diff < 0) != (raw < 0 && burst > 0):
			t.Fatalf("RS-12 replicaDiff(%d, %d, %d) = %d has the wrong sign", a, d, burst, diff)
		case raw <= burst && raw >= -burst && diff != raw:
			t.Fatalf("RS-12 replicaDiff(%d, %d, %d) = %d, want %d", a, d, burst, diff, raw)
		}
	})
}

// ---------------------------------------------------------------------------
// Bad input never crashes a sync.

// fuzzBurst caps creations and deletions per sync in the bad-input target
// (RS-12), so huge replicas stay fast and within the fixture recorder's
// 100-event buffer.
const fuzzBurst = 8

// FuzzSyncReplicaSetBadInput runs one sync (directly, so a panic fails the
// test instead of being recovered by the runner) of a fuzzed ReplicaSet over
// fuzzed pods: nil, zero, negative and huge replicas; nil, empty,
// non-matching and invalid selectors; a template without labels;
// deletionTimestamps; ControllerRefs to missing owners, two controller refs,
// wrong kinds, the owner's UID on a pod; pods of a sibling ReplicaSet;
// terminating, finished and foreign pods. Properties: the sync returns (any
// error is fine); it never both creates and deletes, and does at most burst
// of either (RS-12); it creates and deletes nothing for a ReplicaSet being
// deleted (RS-6); every created pod is in the namespace, has labels and a
// ControllerRef to the ReplicaSet (RS-13), and for a valid ReplicaSet
// (VA-13) its labels match the selector; every deleted pod was an active
// input pod (RS-4, RS-14) whose ControllerRef was the ReplicaSet or absent
// (adopted) and, for a valid ReplicaSet, matched the selector; every adopt
// or release patch is on a pod that was an orphan or the ReplicaSet's
// (AD-1..AD-5), never on another controller's pod; a status write has
// non-negative counts with available ≤ ready ≤ replicas and
// fullyLabeled ≤ replicas (VA-13) and observedGeneration = generation (RS-16).
func FuzzSyncReplicaSetBadInput(f *testing.F) {
	// replicas, flags, selector mode, pods (4 bytes each)
	f.Add(int32(3), uint8(0), uint8(0), []byte{})
	f.Add(int32(1), uint8(0), uint8(0), []byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0})
	f.Add(int32(-4), uint8(0), uint8(0), []byte{0, 0, 1, 0})
	f.Add(int32(math.MaxInt32), uint8(0), uint8(0), []byte{1, 0, 1, 0})
	f.Add(int32(0), uint8(0), uint8(0), []byte{0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 4, 0, 1, 0, 5, 0, 1, 0, 6, 0, 1, 0, 7, 0, 1, 0})
	f.Add(int32(2), uint8(1), uint8(1), []byte{0, 0, 1, 0})
	f.Add(int32(2), uint8(2), uint8(2), []byte{0, 0, 1, 0})
	f.Add(int32(2), uint8(4), uint8(3), []byte{0, 1, 1, 0, 1, 2, 1, 0})
	f.Add(int32(2), uint8(8|16), uint8(4), []byte{5, 0, 1, 0})
	f.Add(int32(1), uint8(8|32|64|128), uint8(5), []byte{0, 0, 1, 1, 0, 0, 2, 2, 5, 0, 3, 3, 5, 3, 1, 0})
	f.Add(int32(5), uint8(8), uint8(0), []byte{0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 0, 1, 0})
	// Scale-down of ready pods (state 21, 53, 22: Running and Ready on nodes 1, 1, 2, Ready 21, 53,
	// 22 minutes ago) with ranks from a sibling ReplicaSet's pod (RS-14 rules 5, 6, 7, 8).
	f.Add(int32(1), uint8(8), uint8(0), []byte{0, 0, 21, 33, 0, 0, 53, 44, 0, 0, 22, 11, 5, 3, 21, 33})
	f.Add(int32(2), uint8(8|32), uint8(0), []byte{0, 0, 21, 33, 0, 0, 21, 34, 0, 0, 53, 33, 0, 0, 25, 8})
	f.Fuzz(func(t *testing.T, replicas int32, flags, selectorMode uint8, podData []byte) {
		rs, sibling := badReplicaSet(replicas, flags, selectorMode)
		pods := badPods(rs, sibling, podData)
		objs := []runtime.Object{rs, sibling}
		for _, p := range pods {
			objs = append(objs, p)
		}
		fx := newFixture(t, objs...)
		fx.c.cfg.BurstReplicas = fuzzBurst
		_, _ = fx.sync() // must return, with or without an error
		checkBadInputSync(t, fx, rs, pods)
	})
}

// checkBadInputSync checks FuzzSyncReplicaSetBadInput's write properties.
func checkBadInputSync(t *testing.T, fx *fixture, rs *appsv1.ReplicaSet, pods []*v1.Pod) {
	t.Helper()
	valid := controllertest.SpecValid(rs.Spec.Replicas, rs.Spec.Selector, rs.Spec.Template.Labels) // VA-13
	sel, _ := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	byName := map[string]*v1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	creates, deletes := 0, 0
	for _, a := range fx.Client.Actions() {
		switch {
		case a.GetVerb() == "create" && a.GetResource().Resource == "pods":
			creates++
			p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
			ref := metav1.GetControllerOf(p)
			if p.Namespace != rs.Namespace || len(p.Labels) == 0 || ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" {
				t.Fatalf("RS-13: created pod ns=%q labels=%v ControllerRef=%+v", p.Namespace, p.Labels, ref)
			}
			if valid && !sel.Matches(labels.Set(p.Labels)) {
				t.Fatalf("RS-13: created pod labels %v do not match the selector %v", p.Labels, rs.Spec.Selector)
			}
		case a.GetVerb() == "delete" && a.GetResource().Resource == "pods":
			deletes++
			p := byName[a.(clienttesting.DeleteAction).GetName()]
			if p == nil || !isPodActive(p) || p.Namespace != rs.Namespace {
				t.Fatalf("RS-14: deleted %q, not an active input pod in the namespace", a.(clienttesting.DeleteAction).GetName())
			}
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID != rs.UID {
				t.Fatalf("RS-4: deleted pod %s controlled by %s/%s", p.Name, ref.Kind, ref.UID)
			}
			if valid && !sel.Matches(labels.Set(p.Labels)) {
				t.Fatalf("RS-4: deleted pod %s whose labels %v do not match the selector", p.Name, p.Labels)
			}
		case a.GetVerb() == "patch" && a.GetResource().Resource == "pods":
			p := byName[a.(clienttesting.PatchAction).GetName()]
			if p == nil {
				t.Fatalf("AD-4: patched unknown pod %q", a.(clienttesting.PatchAction).GetName())
			}
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID != rs.UID {
				t.Fatalf("AD-1: patched pod %s controlled by %s/%s", p.Name, ref.Kind, ref.UID)
			}
		case a.GetVerb() == "update" && a.GetSubresource() == "status":
			checkBadInputStatus(t, a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Status, rs)
		}
	}
	switch {
	case creates > 0 && deletes > 0:
		t.Fatalf("RS-12: %d creates and %d deletes in one sync", creates, deletes)
	case creates > fuzzBurst || deletes > fuzzBurst:
		t.Fatalf("RS-12: %d creates, %d deletes; burst is %d", creates, deletes, fuzzBurst)
	case rs.DeletionTimestamp != nil && creates+deletes > 0:
		t.Fatalf("RS-6: %d creates, %d deletes for a ReplicaSet being deleted", creates, deletes)
	}
}

// badReplicaSet is testRS ("ns/rs", selector and template app=web) with
// fuzzed replicas, flags (1 nil replicas, 2 deletionTimestamp, 4 template
// without labels, 8 controlled by a (missing) Deployment, which a sibling
// ReplicaSet "rs2" shares, 16 a second controller ref, 32 minReadySeconds,
// 64 an existing ReplicaFailure condition, 128 generation ahead of status)
// and selector (0 matching, 1 nil, 2 empty, 3 not matching the template,
// 4 invalid operator, 5 matchExpressions).
func badReplicaSet(replicas int32, flags, selectorMode uint8) (rs, sibling *appsv1.ReplicaSet) {
	rs = testRS(replicas)
	rs.Spec.Selector = controllertest.FuzzSelector(selectorMode, rs.Spec.Selector, "web", "db")
	if flags&1 != 0 {
		rs.Spec.Replicas = nil
	}
	if flags&2 != 0 {
		rs.DeletionTimestamp = ptr.To(metav1.NewTime(testNow))
	}
	if flags&4 != 0 {
		rs.Spec.Template.Labels = nil
	}
	sibling = testRS(1)
	sibling.Name, sibling.UID = "rs2", "rs2-uid"
	sibling.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
	sibling.Spec.Template.Labels = map[string]string{"app": "web", "v": "2"}
	if flags&8 != 0 {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-uid", Controller: ptr.To(true)}
		rs.OwnerReferences = []metav1.OwnerReference{ref}
		sibling.OwnerReferences = []metav1.OwnerReference{ref}
	}
	if flags&16 != 0 {
		rs.OwnerReferences = append(rs.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s", UID: "s-uid", Controller: ptr.To(true)})
	}
	if flags&32 != 0 {
		rs.Spec.MinReadySeconds = 30
	}
	if flags&64 != 0 {
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate"}}
	}
	if flags&128 != 0 {
		rs.Generation, rs.Status.ObservedGeneration = 7, 3
	}
	return rs, sibling
}

// badPods decodes up to 12 pods, 4 bytes each: owner (0 rs, 1 orphan,
// 2 another controller, 3 rs and another controller, 4 rs's UID under
// kind Deployment, 5 the sibling, 6 rs with the pod's UID equal to rs's,
// 7 rs's name with another UID), labels (0 app=web, 1 none, 2 app=other,
// 3 app=web,v=2), state (phase/readiness/deletion/node) and namespace/cost.
func badPods(rs, sibling *appsv1.ReplicaSet, data []byte) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; i+4 <= len(data) && len(out) < 12; i += 4 {
		owner, lbl, state, misc := data[i], data[i+1], data[i+2], data[i+3]
		p := fuzzPod(i/4, []byte{state, state >> 2, state, misc, misc >> 4, misc, byte(i)})
		p.UID = types.UID(fmt.Sprintf("pod-uid-%d", i/4))
		ctrl := func(kind, name string, uid types.UID) metav1.OwnerReference {
			return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
		}
		switch owner % 8 {
		case 0:
			ownedBy(rs)(p)
		case 2:
			p.OwnerReferences = []metav1.OwnerReference{ctrl("ReplicaSet", "x", "x-uid")}
		case 3:
			p.OwnerReferences = []metav1.OwnerReference{ctrl("ReplicaSet", rs.Name, rs.UID), ctrl("ReplicaSet", "x", "x-uid")}
		case 4:
			p.OwnerReferences = []metav1.OwnerReference{ctrl("Deployment", rs.Name, rs.UID)}
		case 5:
			ownedBy(sibling)(p)
		case 6:
			ownedBy(rs)(p)
			p.UID = rs.UID
		case 7:
			p.OwnerReferences = []metav1.OwnerReference{ctrl("ReplicaSet", rs.Name, "stale-uid")}
		}
		p.Labels = []map[string]string{{"app": "web"}, nil, {"app": "other"}, {"app": "web", "v": "2"}}[lbl%4]
		if state&0x80 != 0 {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(testNow))
		}
		if state&0x40 != 0 {
			p.Status.Phase = []v1.PodPhase{v1.PodSucceeded, v1.PodFailed}[state&1]
		}
		if misc&0x80 != 0 {
			p.Namespace = "other"
		}
		out = append(out, p)
	}
	return out
}

// checkBadInputStatus checks a status write of FuzzSyncReplicaSetBadInput (VA-13, RS-16).
func checkBadInputStatus(t *testing.T, st appsv1.ReplicaSetStatus, rs *appsv1.ReplicaSet) {
	t.Helper()
	if st.Replicas < 0 || st.FullyLabeledReplicas < 0 || st.ReadyReplicas < 0 || st.AvailableReplicas < 0 ||
		st.AvailableReplicas > st.ReadyReplicas || st.ReadyReplicas > st.Replicas || st.FullyLabeledReplicas > st.Replicas ||
		ptr.Deref(st.TerminatingReplicas, 0) < 0 {
		t.Fatalf("VA-13: status %+v", st)
	}
	if st.ObservedGeneration != rs.Generation {
		t.Fatalf("RS-16: observedGeneration %d, generation %d", st.ObservedGeneration, rs.Generation)
	}
}
