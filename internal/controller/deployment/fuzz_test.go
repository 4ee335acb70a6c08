package deployment

// Fuzz targets: properties of the pure rolling-update and proportional-scaling
// math (sections 3 and 4 of the spec) and one "bad input never crashes a sync"
// target. Run them with .ci/fuzz; `go test` runs only their seed corpus.
// All of the package's fuzzing lives in this one file (targets, decoders,
// documented counterexamples), hence its length.

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// ---------------------------------------------------------------------------
// Decoding fuzz primitives into objects.

// bounded maps any fuzzed int32 onto [0, limit].
func bounded(v, limit int32) int32 { return int32(uint32(v) % uint32(limit+1)) }

// fuzzFencepost is an int-or-percent from fuzzed primitives: "N%" when
// percent, else the int N, with N bounded to [0, limit].
func fuzzFencepost(percent bool, v, limit int32) intstr.IntOrString {
	n := bounded(v, limit)
	if percent {
		return intstr.FromString(strconv.Itoa(int(n)) + "%")
	}
	return intstr.FromInt32(n)
}

// resolvedOracle is RU-1..RU-3 written independently of fenceposts.go, in
// integer arithmetic: ceil/floor(p × replicas / 100) for percents, the int
// as is, nil as 0, and unavailable forced to 1 when both are 0.
func resolvedOracle(surge, unavailable *intstr.IntOrString, replicas int32) (int32, int32) {
	value := func(v *intstr.IntOrString, roundUp bool) int64 {
		switch {
		case v == nil:
			return 0
		case v.Type == intstr.Int:
			return int64(v.IntVal)
		}
		p, err := strconv.ParseInt(v.StrVal[:len(v.StrVal)-1], 10, 64)
		if err != nil {
			panic(err) // only valid percents reach the oracle
		}
		if roundUp {
			return (p*int64(replicas) + 99) / 100
		}
		return p * int64(replicas) / 100
	}
	s, u := value(surge, true), value(unavailable, false)
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

// fuzzDeployment is a RollingUpdate Deployment (or Recreate when recreate)
// with the given replicas and fenceposts.
func fuzzDeployment(replicas int32, surge, unavailable intstr.IntOrString, recreate bool) *appsv1.Deployment {
	d := newDeployment(replicas, surge, unavailable)
	if recreate {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return d
}

// maxFuzzRSs caps how many ReplicaSets the pure targets decode.
const maxFuzzRSs = 8

// fuzzReplicaSets decodes up to maxFuzzRSs ReplicaSets of d, 3 bytes each:
// spec.replicas, status.availableReplicas (may exceed spec, as a stale
// status does right after a scale-down) and the creation minute (mod 8, so
// ties fall back to names). newIdx picks the new ReplicaSet (with d's
// template); past the end there is none. old is oldReplicaSets' result.
func fuzzReplicaSets(d *appsv1.Deployment, data []byte, newIdx uint8) (all, old []*appsv1.ReplicaSet, newOne *appsv1.ReplicaSet) {
	n := min(len(data)/3, maxFuzzRSs)
	pick := int(newIdx) % (n + 1)
	for i := range n {
		spec, avail, minute := int32(data[3*i]), int32(data[3*i+1]), int(data[3*i+2]%8)
		image := fmt.Sprintf("nginx:old-%d", i)
		if i == pick {
			image = "nginx:1.14.2"
		}
		rs := withStatus(newRS(d, fmt.Sprintf("rs-%d", i), image, spec, minute, nil), max(spec, avail), avail)
		if i == pick {
			newOne = rs
		}
		all = append(all, rs)
	}
	return all, rolloutstate.OldReplicaSets(all, newOne), newOne
}

// rsBytes encodes (spec, available, minute) triples for fuzzReplicaSets seeds.
func rsBytes(v ...int) []byte {
	out := make([]byte, len(v))
	for i, x := range v {
		out[i] = byte(x)
	}
	return out
}

// ---------------------------------------------------------------------------
// Section 3.1: fenceposts.

// FuzzFenceposts checks RU-1..RU-7 for any replicas ≥ 0 and any valid
// int-or-percent pair (percents beyond 100% included): resolveFenceposts
// matches an independent integer oracle (RU-2 ceil/floor, RU-3 forcing);
// maxSurge ≥ 0 with no 0-replicas special case (RU-5); 0 ≤ maxUnavailable ≤
// replicas, 0 for 0 replicas (RU-4); minAvailable = replicas − maxUnavailable
// in [0, replicas] (RU-6); with replicas > 0 surge and unavailable are never
// both 0 (RU-3); Recreate gives 0/0/0. With an arbitrary string instead
// (RU-2, VA-8) it never panics, returns an error iff a string is not an
// integer followed by "%", and counts such a value as 0. mode bits: 1 nil
// maxSurge, 2 nil maxUnavailable (RU-1), 4 nil rollingUpdate, 8 Recreate,
// 16 maxSurge = raw, 32 maxUnavailable = raw.
func FuzzFenceposts(f *testing.F) {
	for _, r := range []int32{1, 3, 4, 10, 100} { // RU-7, default 25%/25%
		f.Add(r, true, int32(25), true, int32(25), uint8(0), "")
	}
	f.Add(int32(10), false, int32(0), true, int32(1), uint8(0), "")  // RU-7: 0/1% → unavailable forced to 1
	f.Add(int32(0), true, int32(100), true, int32(25), uint8(0), "") // 0 replicas, 100% surge
	f.Add(int32(0), false, int32(2), false, int32(3), uint8(0), "")  // RU-5: an int surge stays at 0 replicas
	f.Add(int32(7), false, int32(0), false, int32(0), uint8(0), "")  // maxSurge = maxUnavailable = 0
	f.Add(int32(10), true, int32(33), true, int32(33), uint8(0), "") // "33%"
	f.Add(int32(3), true, int32(300), false, int32(9), uint8(0), "") // surge beyond 100%, unavailable > replicas
	f.Add(int32(5), false, int32(1), false, int32(1), uint8(3), "")  // RU-1: both nil
	f.Add(int32(5), false, int32(1), false, int32(1), uint8(4), "")  // nil rollingUpdate
	f.Add(int32(5), false, int32(1), false, int32(1), uint8(8), "")  // Recreate
	for i, raw := range []string{"150%", "-5%", "+5%", "abc", "5", "%", "", "1e3%", " 5%", "99999999999999999999%", "0%", "00025%"} {
		f.Add(int32(10), false, int32(1), false, int32(1), uint8(16<<(i%2)), raw)
	}
	f.Add(int32(10), false, int32(1), false, int32(1), uint8(48), "abc") // both invalid
	f.Fuzz(checkFenceposts)
}

// checkFenceposts is FuzzFenceposts' body: it builds the Deployment from the
// fuzzed values (see fencepostsFuzzInput), checks resolveFenceposts against
// the oracle (RU-1..RU-3, VA-8), then the resolved fenceposts (RU-3..RU-6).
func checkFenceposts(t *testing.T, replicasIn int32, surgePct bool, surgeIn int32, unavPct bool, unavIn int32, mode uint8, raw string) {
	t.Helper()
	d, replicas, surge, unavailable := fencepostsFuzzInput(replicasIn, surgePct, surgeIn, unavPct, unavIn, mode, raw)
	gotSurge, gotUnav, err := rolloutstate.ResolveFenceposts(surge, unavailable, replicas)
	okS, parsesS := classifyFencepost(surge)
	okU, parsesU := classifyFencepost(unavailable)
	if (err == nil) != (parsesS && parsesU) {
		t.Fatalf("RU-2 rolloutstate.ResolveFenceposts(%v, %v) err = %v; want an error iff a string is not an integer followed by %%", surge, unavailable, err)
	}
	if !okS || !okU { // outside VA-8: only unparseable values have a contract, they count as 0
		if (okS || !parsesS) && (okU || !parsesU) {
			wantSurge, wantUnav := resolvedOracle(parsedOrNil(surge), parsedOrNil(unavailable), replicas)
			if gotSurge != wantSurge || gotUnav != wantUnav {
				t.Fatalf("RU-2: invalid values must count as 0: rolloutstate.ResolveFenceposts(%v, %v, %d) = %d, %d; want %d, %d", surge, unavailable, replicas, gotSurge, gotUnav, wantSurge, wantUnav)
			}
		}
		return
	}
	wantSurge, wantUnav := resolvedOracle(surge, unavailable, replicas)
	if err != nil || gotSurge != wantSurge || gotUnav != wantUnav {
		t.Fatalf("RU-1..RU-3 rolloutstate.ResolveFenceposts(%v, %v, %d) = %d, %d, %v; want %d, %d", surge, unavailable, replicas, gotSurge, gotUnav, err, wantSurge, wantUnav)
	}
	checkFencepostsOf(t, d, replicas, surge, unavailable, wantSurge, wantUnav)
}

// fencepostsFuzzInput turns FuzzFenceposts' values into a Deployment (mode
// bits as documented there), its bounded replicas, and the maxSurge and
// maxUnavailable as rolloutstate.ResolveFenceposts sees them.
func fencepostsFuzzInput(replicasIn int32, surgePct bool, surgeIn int32, unavPct bool, unavIn int32, mode uint8, raw string) (*appsv1.Deployment, int32, *intstr.IntOrString, *intstr.IntOrString) {
	replicas := bounded(replicasIn, 100000)
	s, u := fuzzFencepost(surgePct, surgeIn, 100000), fuzzFencepost(unavPct, unavIn, 100000)
	if surgePct {
		s = fuzzFencepost(true, surgeIn, 1000)
	}
	if unavPct {
		u = fuzzFencepost(true, unavIn, 1000)
	}
	if mode&16 != 0 {
		s = intstr.FromString(raw)
	}
	if mode&32 != 0 {
		u = intstr.FromString(raw)
	}
	d := fuzzDeployment(replicas, s, u, mode&8 != 0)
	var surge, unavailable *intstr.IntOrString
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if mode&1 != 0 {
			ru.MaxSurge = nil
		}
		if mode&2 != 0 {
			ru.MaxUnavailable = nil
		}
		if mode&4 != 0 {
			d.Spec.Strategy.RollingUpdate = nil
		} else {
			surge, unavailable = ru.MaxSurge, ru.MaxUnavailable
		}
	}
	return d, replicas, surge, unavailable
}

// checkFencepostsOf checks rolloutstate.FencepostsOf(d) for valid values:
// Recreate gives 0/0/replicas (RU-4, RU-5); RollingUpdate gives the oracle's
// surge and unavailable capped at replicas (RU-4..RU-6), within bounds, and
// never both 0 for replicas > 0 (RU-3).
func checkFencepostsOf(t *testing.T, d *appsv1.Deployment, replicas int32, surge, unavailable *intstr.IntOrString, wantSurge, wantUnav int32) {
	t.Helper()
	f, err := rolloutstate.FencepostsOf(d)
	if err != nil {
		t.Fatalf("fencepostsOf: %v", err)
	}
	ms, mu, ma := f.MaxSurge, f.MaxUnavailable, f.MinAvailable()
	if !isRollingUpdate(d) {
		if ms != 0 || mu != 0 || ma != replicas {
			t.Fatalf("RU-4, RU-5 Recreate: maxSurge %d, maxUnavailable %d, minAvailable %d; want 0, 0, replicas %d", ms, mu, ma, replicas)
		}
		return
	}
	wantMU := min(wantUnav, replicas) // RU-4
	if replicas == 0 {
		wantMU = 0
	}
	if ms != wantSurge || mu != wantMU || ma != replicas-wantMU {
		t.Fatalf("RU-4..RU-6: replicas %d (%v, %v): maxSurge %d, maxUnavailable %d, minAvailable %d; want %d, %d, %d",
			replicas, surge, unavailable, ms, mu, ma, wantSurge, wantMU, replicas-wantMU)
	}
	if ms < 0 || mu < 0 || mu > replicas || ma < 0 || ma > replicas {
		t.Fatalf("bounds: replicas %d: maxSurge %d, maxUnavailable %d, minAvailable %d", replicas, ms, mu, ma)
	}
	if replicas > 0 && ms == 0 && mu == 0 {
		t.Fatalf("RU-3: replicas %d (%v, %v): surge and unavailable both 0, no rollout could progress", replicas, surge, unavailable)
	}
}

// validPercent is VA-8's percent form.
var validPercent = regexp.MustCompile(`^[0-9]+%$`)

// classifyFencepost reports whether v is nil, an int, or a VA-8 percent of
// at most 1000% (ok: the oracle applies), and whether it parses at all (an
// integer followed by "%", as intstr requires).
func classifyFencepost(v *intstr.IntOrString) (ok, parses bool) {
	if v == nil || v.Type == intstr.Int {
		return true, true
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	parses = strings.HasSuffix(v.StrVal, "%") && err == nil
	return parses && validPercent.MatchString(v.StrVal) && n <= 1000, parses
}

// parsedOrNil returns v, or nil when it does not parse (RU-2: counts as 0).
func parsedOrNil(v *intstr.IntOrString) *intstr.IntOrString {
	if _, parses := classifyFencepost(v); !parses {
		return nil
	}
	return v
}

// ---------------------------------------------------------------------------
// Section 3.2: rolling update.

// FuzzNewRSNewReplicas checks RU-10 (and RU-9's precondition that the new
// ReplicaSet is at most replicas): newRSNewReplicas never shrinks the new
// ReplicaSet and never takes it above replicas; when Σ spec over all
// ReplicaSets is below replicas + maxSurge it grows at most to that bound
// and uses all of it that replicas allows; when Σ spec is already at or over
// the bound it keeps the size. Recreate returns replicas.
func FuzzNewRSNewReplicas(f *testing.F) {
	f.Add(int32(10), true, int32(25), true, int32(25), rsBytes(10, 10, 0), uint8(1), false)                 // RU-16 sync 1: create B with 3
	f.Add(int32(10), true, int32(25), true, int32(25), rsBytes(8, 8, 0, 3, 0, 1), uint8(1), false)          // RU-16 sync 2: B 3 → 5
	f.Add(int32(10), true, int32(25), true, int32(25), rsBytes(10, 10, 0, 3, 0, 1), uint8(1), false)        // at the bound: keep 3
	f.Add(int32(0), true, int32(100), false, int32(0), rsBytes(4, 4, 0), uint8(1), false)                   // 0 replicas, 100% surge
	f.Add(int32(5), false, int32(0), false, int32(0), rsBytes(5, 5, 0, 0, 0, 1), uint8(1), false)           // surge = unavailable = 0
	f.Add(int32(9), true, int32(33), true, int32(33), rsBytes(9, 20, 0, 0, 0, 0, 2, 0, 3), uint8(2), false) // "33%", zero-size olds, avail > spec
	f.Add(int32(7), true, int32(25), true, int32(25), rsBytes(20, 0, 0, 1, 0, 1), uint8(1), false)          // already over the bound
	f.Add(int32(4), false, int32(1), false, int32(1), rsBytes(4, 4, 0), uint8(0), true)                     // Recreate
	f.Fuzz(func(t *testing.T, replicasIn int32, surgePct bool, surgeIn int32, unavPct bool, unavIn int32, rss []byte, newIdx uint8, recreate bool) {
		replicas := bounded(replicasIn, 300)
		s, u := fuzzFencepost(surgePct, surgeIn, 300), fuzzFencepost(unavPct, unavIn, 300)
		d := fuzzDeployment(replicas, s, u, recreate)
		all, _, newRS := fuzzReplicaSets(d, rss, newIdx)
		if newRS != nil && specReplicas(newRS) > replicas {
			newRS.Spec.Replicas = ptr.To(specReplicas(newRS) % (replicas + 1)) // RU-9 scales it down first
		}
		f, _ := rolloutstate.FencepostsOf(d)
		got, err := newRSNewReplicas(d, f, all, newRS)
		if err != nil {
			t.Fatalf("newRSNewReplicas: %v", err)
		}
		if recreate {
			if got != replicas {
				t.Fatalf("RU-10 Recreate: got %d, want replicas %d", got, replicas)
			}
			return
		}
		surge, _ := resolvedOracle(&s, &u, replicas)
		cur, current, maxTotal := specReplicas(newRS), sumSpecReplicas(all), replicas+surge
		after := current - cur + got
		switch {
		case got < cur:
			t.Fatalf("RU-10 shrinks the new ReplicaSet %d → %d (replicas %d, Σspec %d, maxTotal %d)", cur, got, replicas, current, maxTotal)
		case got > replicas:
			t.Fatalf("RU-10 new ReplicaSet %d above replicas %d", got, replicas)
		case current >= maxTotal && got != cur:
			t.Fatalf("RU-10 Σspec %d ≥ replicas+maxSurge %d, yet the new ReplicaSet grows %d → %d", current, maxTotal, cur, got)
		case current < maxTotal && after > maxTotal:
			t.Fatalf("RU-10 surge bound: Σspec %d → %d > replicas+maxSurge %d", current, after, maxTotal)
		case current < maxTotal && got != replicas && after != maxTotal:
			t.Fatalf("RU-10 leaves budget unused: new %d → %d, Σspec %d → %d < %d", cur, got, current, after, maxTotal)
		}
	})
}

// FuzzRollingScaleDown checks RU-11 with IM-6, first on its pure parts,
// then on the whole of reconcileOldReplicaSets through the fake clientset.
// Pure parts: maxScaledDown is Σspec − minAvailable − (spec − avail of the
// new ReplicaSet); step A (unhealthyScaleDowns) removes only unavailable
// replicas of active old ReplicaSets, oldest first, at most the budget and
// all of it when there are enough, leaving Σ min(spec, available)
// unchanged; step B (healthyScaleDowns, on the result of A) removes at most
// Σ min(spec, available) − minAvailable, oldest first; a plan only names
// active old ReplicaSets and never removes more than a ReplicaSet's spec;
// A + B stays within maxScaledDown; Σ min(spec, available) (IM-6) never ends
// below minAvailable when it started at or above it. Whole (both steps
// through scaleReplicaSet, IM-2 between them): only old ReplicaSets are
// written, none grows or goes below 0, the total removed equals the pure
// plans' and stays within maxScaledDown, IM-6 holds on the written sizes,
// and "scaled" is reported iff something was removed.
func FuzzRollingScaleDown(f *testing.F) {
	f.Add(int32(10), true, int32(25), true, int32(25), rsBytes(10, 10, 0, 3, 0, 1), uint8(1))                // RU-16 sync 1: A 10 → 8
	f.Add(int32(10), true, int32(25), true, int32(25), rsBytes(8, 8, 0, 5, 0, 1), uint8(1))                  // RU-16 sync 3: nothing
	f.Add(int32(20), true, int32(25), true, int32(25), rsBytes(10, 15, 0, 15, 8, 1), uint8(1))               // IM-6: stale avail 15 > spec 10
	f.Add(int32(10), false, int32(0), false, int32(0), rsBytes(6, 2, 0, 3, 1, 0, 4, 3, 1), uint8(2))         // 0/0 → 1, unhealthy olds, tie on minute
	f.Add(int32(9), true, int32(33), true, int32(33), rsBytes(5, 1, 0, 0, 0, 1, 4, 9, 2, 3, 3, 3), uint8(3)) // "33%", zero-size old
	f.Add(int32(0), true, int32(100), true, int32(25), rsBytes(3, 3, 0, 2, 0, 1), uint8(9))                  // 0 replicas, no new RS
	f.Add(int32(4), false, int32(1), false, int32(4), rsBytes(4, 0, 0, 4, 4, 1), uint8(1))                   // maxUnavailable = replicas
	f.Add(int32(6), false, int32(2), false, int32(0), rsBytes(6, 6, 3, 2, 2, 3, 2, 0, 3), uint8(2))          // name tie-break
	f.Fuzz(func(t *testing.T, replicasIn int32, surgePct bool, surgeIn int32, unavPct bool, unavIn int32, rss []byte, newIdx uint8) {
		replicas := bounded(replicasIn, 300)
		d := fuzzDeployment(replicas, fuzzFencepost(surgePct, surgeIn, 300), fuzzFencepost(unavPct, unavIn, 300), false)
		all, old, newRS := fuzzReplicaSets(d, rss, newIdx)
		wantRemoved := checkScaleDownPlans(t, d, all, old, newRS)
		checkReconcileOldReplicaSets(t, d, all, old, newRS, wantRemoved)
	})
}

// checkScaleDownPlans checks FuzzRollingScaleDown's pure properties and
// returns how many replicas steps A and B remove together.
func checkScaleDownPlans(t *testing.T, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	t.Helper()
	f, _ := rolloutstate.FencepostsOf(d)
	floor := f.MinAvailable()
	budget := maxScaledDown(f, all, newRS)
	want := sumSpecReplicas(all) - floor
	if newRS != nil {
		want -= specReplicas(newRS) - newRS.Status.AvailableReplicas
	}
	if budget != want {
		t.Fatalf("RU-11 maxScaledDown = %d, want %d", budget, want)
	}
	if budget <= 0 || sumSpecReplicas(activeReplicaSets(old)) == 0 {
		return 0 // reconcileOldReplicaSets stops here
	}
	availBefore := sumAvailableWithinSize(all)

	activeOld := activeReplicaSets(old)
	planA, totalA := checkPlan(t, "step A", unhealthyScaleDowns(activeOld, budget), activeOld)
	if totalA > budget {
		t.Fatalf("RU-11 step A removes %d > maxScaledDown %d", totalA, budget)
	}
	exhausted := false // oldest first: a newer ReplicaSet only gets replicas once older ones gave all theirs
	for _, rs := range sortedOldestFirst(activeOld) {
		unhealthy := max(0, specReplicas(rs)-rs.Status.AvailableReplicas)
		if planA[rs] > unhealthy {
			t.Fatalf("RU-11 step A removes %d of %s's %d unavailable replicas", planA[rs], rs.Name, unhealthy)
		}
		if exhausted && planA[rs] > 0 {
			t.Fatalf("RU-11 step A scales %s down although an older ReplicaSet kept unavailable replicas", rs.Name)
		}
		if planA[rs] < unhealthy {
			exhausted = true
			if totalA != budget {
				t.Fatalf("RU-11 step A stops at %d of budget %d with %s still unhealthy", totalA, budget, rs.Name)
			}
		}
	}
	allA, oldA := appliedPlan(all, planA)
	if got := sumAvailableWithinSize(allA); got != availBefore {
		t.Fatalf("RU-11 step A changed Σ min(spec, available) %d → %d: it removed available replicas", availBefore, got)
	}

	activeOldA := activeReplicaSets(oldA)
	newA := findByUID(allA, newRS)
	planB, totalB := checkPlan(t, "step B", healthyScaleDowns(f, activeOldA, withNew(activeOldA, newA), math.MaxInt32), activeOldA)
	if limit := max(0, sumAvailableWithinSize(withNew(activeOldA, newA))-floor); totalB > limit {
		t.Fatalf("RU-11 step B removes %d > Σ min(spec, available) − minAvailable = %d", totalB, limit)
	}
	if totalA+totalB > budget {
		t.Fatalf("RU-11 steps A+B remove %d+%d > maxScaledDown %d", totalA, totalB, budget)
	}
	allB, _ := appliedPlan(allA, planB)
	if after := sumAvailableWithinSize(allB); availBefore >= floor && after < floor {
		t.Fatalf("IM-6: Σ min(spec, available) %d → %d < minAvailable %d", availBefore, after, floor)
	}
	return totalA + totalB
}

// checkPlan fails unless p resizes distinct active old ReplicaSets, oldest
// first, each down by 1..spec replicas; it returns the replicas removed per
// ReplicaSet and in total.
func checkPlan(t *testing.T, step string, p plan, activeOld []*appsv1.ReplicaSet) (map[*appsv1.ReplicaSet]int32, int32) {
	t.Helper()
	removed := map[*appsv1.ReplicaSet]int32{}
	var total int32
	for i, r := range p {
		if !slices.Contains(activeOld, r.rs) {
			t.Fatalf("RU-11 %s touches %s, which is not an active old ReplicaSet", step, r.rs.Name)
		}
		if _, dup := removed[r.rs]; dup {
			t.Fatalf("RU-11 %s resizes %s twice", step, r.rs.Name)
		}
		if i > 0 && rolloutstate.OlderFirst(r.rs, p[i-1].rs) {
			t.Fatalf("RU-11 %s writes %s after the newer %s: want oldest first", step, r.rs.Name, p[i-1].rs.Name)
		}
		n := specReplicas(r.rs) - r.size
		if n <= 0 || n > specReplicas(r.rs) {
			t.Fatalf("RU-11 %s removes %d of %s's %d replicas", step, n, r.rs.Name, specReplicas(r.rs))
		}
		removed[r.rs] = n
		total += n
	}
	return removed, total
}

// appliedPlan returns copies of all with plan's removals applied to spec (statuses stay
// stale, as the cache is right after the writes) and the old ones among
// them, oldest first.
func appliedPlan(all []*appsv1.ReplicaSet, plan map[*appsv1.ReplicaSet]int32) (out, old []*appsv1.ReplicaSet) {
	for _, rs := range all {
		c := rs.DeepCopy()
		c.Spec.Replicas = ptr.To(specReplicas(rs) - plan[rs])
		out = append(out, c)
		if !isNew(rs) {
			old = append(old, c)
		}
	}
	return out, sortedOldestFirst(old)
}

// isNew reports whether rs carries the Deployment's template image (the
// image fuzzReplicaSets gives the new ReplicaSet).
func isNew(rs *appsv1.ReplicaSet) bool {
	return rs.Spec.Template.Spec.Containers[0].Image == "nginx:1.14.2"
}

// findByUID returns the ReplicaSet in rss with rs's UID, or nil.
func findByUID(rss []*appsv1.ReplicaSet, rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	for _, r := range rss {
		if rs != nil && r.UID == rs.UID {
			return r
		}
	}
	return nil
}

func sortedOldestFirst(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := append([]*appsv1.ReplicaSet(nil), rss...)
	sortOldestFirst(out)
	return out
}

// checkReconcileOldReplicaSets runs reconcileOldReplicaSets on a fixture
// holding d and all and checks FuzzRollingScaleDown's whole-step properties.
func checkReconcileOldReplicaSets(t *testing.T, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, wantRemoved int32) {
	t.Helper()
	objs := []runtime.Object{d}
	for _, rs := range all {
		objs = append(objs, rs)
	}
	fx := newFixture(t, objs...)
	sc := &syncContext{c: fx.c, key: cache.ObjectName{Namespace: "ns", Name: "nginx"}, logger: klog.FromContext(fx.Ctx),
		now: fx.Clock.Now(), d: d.DeepCopy(), f: fencepostsFor(d), rsList: append([]*appsv1.ReplicaSet(nil), all...), newRS: newRS,
		oldRSs: append([]*appsv1.ReplicaSet(nil), old...)}
	floor, budget, availBefore := fencepostsFor(d).MinAvailable(), maxScaledDown(fencepostsFor(d), all, newRS), sumAvailableWithinSize(all)

	fx.Client.ClearActions()
	scaled, err := sc.reconcileOldReplicaSets(fx.Ctx)
	if err != nil {
		t.Fatalf("reconcileOldReplicaSets: %v", err)
	}
	for k, n := range fx.Writes() {
		if k != "update replicasets" && k != "patch replicasets" {
			t.Fatalf("RU-13: unexpected writes %q ×%d", k, n)
		}
	}
	var removed int32
	final := make([]*appsv1.ReplicaSet, 0, len(all))
	for _, rs := range all {
		got := fx.rs(rs.Name)
		before, after := specReplicas(rs), specReplicas(got)
		if rs == newRS && after != before {
			t.Fatalf("RU-11 touched the new ReplicaSet: %d → %d", before, after)
		}
		if after > before || after < 0 {
			t.Fatalf("RU-11 %s: %d → %d", rs.Name, before, after)
		}
		removed += before - after
		final = append(final, got)
	}
	if removed != wantRemoved || (budget <= 0 && removed != 0) || removed > max(0, budget) {
		t.Fatalf("RU-11 removed %d replicas; pure plans say %d, maxScaledDown %d", removed, wantRemoved, budget)
	}
	if scaled != (removed > 0) {
		t.Fatalf("RU-11 reports scaled=%v after removing %d", scaled, removed)
	}
	if after := sumAvailableWithinSize(final); availBefore >= floor && after < floor {
		t.Fatalf("IM-6: Σ min(spec, available) %d → %d < minAvailable %d", availBefore, after, floor)
	}
}

// ---------------------------------------------------------------------------
// Section 4: proportional scaling.

// FuzzProportionalSizes checks PS-3..PS-6 on ReplicaSets last sized for a
// previous replica count (max-replicas = previous replicas + maxSurge, or
// missing so that d.status.replicas is used, PS-6): exactly the active
// ReplicaSets appear, once each; no size is negative; the first ReplicaSet
// takes the leftover clamped at 0, so Σ sizes = replicas + maxSurge (0 for
// 0 replicas) unless that clamp fired (see TestProportionalSizesLeftoverClamp);
// with 0 replicas every size is 0; when the Deployment grew (toAdd > 0 and
// every ReplicaSet was sized for at most the new maximum) no ReplicaSet
// shrinks, and when it shrank (toAdd < 0, every ReplicaSet sized for at
// least the new maximum) none grows. Sizes are kept small enough that PS-5's
// int32 product cannot overflow.
func FuzzProportionalSizes(f *testing.F) {
	// prev replicas, replicas, surge %, surge, unavailable %, unavailable, (spec, minute, annotation mode)…, newIdx, status.replicas
	f.Add(int32(10), int32(30), false, int32(3), false, int32(2), rsBytes(8, 0, 0, 5, 1, 0), uint8(1), int32(13))         // PS-7
	f.Add(int32(100), int32(120), false, int32(20), false, int32(0), rsBytes(100, 0, 0, 20, 1, 0), uint8(1), int32(0))    // PS-8
	f.Add(int32(3), int32(4), false, int32(0), false, int32(0), rsBytes(1, 0, 0, 1, 1, 0, 1, 2, 0), uint8(2), int32(3))   // PS-9 up
	f.Add(int32(3), int32(2), false, int32(0), false, int32(0), rsBytes(1, 0, 0, 1, 1, 0, 1, 2, 0), uint8(2), int32(3))   // PS-9 down
	f.Add(int32(5), int32(10), false, int32(0), false, int32(1), rsBytes(3, 0, 0, 2, 1, 0), uint8(1), int32(5))           // PS-10 5→10
	f.Add(int32(9), int32(4), false, int32(0), false, int32(1), rsBytes(1, 0, 0, 8, 1, 0), uint8(1), int32(9))            // PS-10 9→4
	f.Add(int32(13), int32(8), false, int32(0), false, int32(1), rsBytes(3, 0, 0, 8, 1, 0, 2, 2, 0), uint8(2), int32(13)) // PS-10 13→8
	f.Add(int32(6), int32(0), false, int32(0), false, int32(1), rsBytes(3, 0, 0, 3, 1, 0), uint8(1), int32(6))            // PS-10 6→0
	f.Add(int32(4), int32(5), false, int32(0), false, int32(1), rsBytes(2, 0, 1, 2, 1, 1), uint8(2), int32(4))            // PS-10 no new RS, missing annotations
	f.Add(int32(10), int32(50), false, int32(3), false, int32(2), rsBytes(8, 0, 0, 5, 1, 0), uint8(1), int32(13))         // PS-10-like: 10 → 50
	f.Add(int32(10), int32(30), true, int32(33), true, int32(33), rsBytes(8, 0, 0, 5, 1, 0, 0, 2, 0), uint8(1), int32(0)) // "33%", zero-size old
	f.Add(int32(10), int32(10), true, int32(100), true, int32(0), rsBytes(8, 0, 0, 5, 1, 0), uint8(1), int32(10))         // toAdd = 0… 100% surge
	f.Fuzz(checkProportionalSizes)
}

// checkProportionalSizes is FuzzProportionalSizes' body: it sizes the
// fuzzed ReplicaSets for the new replica count and checks PS-3..PS-6 as
// documented there.
func checkProportionalSizes(t *testing.T, prevIn, replicasIn int32, surgePct bool, surgeIn int32, unavPct bool, unavIn int32, rss []byte, newIdx uint8, statusReplicas int32) {
	t.Helper()
	prev, replicas := bounded(prevIn, 3000), bounded(replicasIn, 3000)
	s, u := fuzzFencepost(surgePct, surgeIn, 300), fuzzFencepost(unavPct, unavIn, 300)
	d := fuzzDeployment(replicas, s, u, false)
	d.Status.Replicas = bounded(statusReplicas, 10000)
	oldMax := prev + fencepostsFor(fuzzDeployment(prev, s, u, false)).MaxSurge
	newMax := replicas + fencepostsFor(d).MaxSurge
	oldRSs, newOne := proportionalFuzzReplicaSets(d, prev, oldMax, rss, newIdx)
	effMax := map[*appsv1.ReplicaSet]int32{}
	active := activeReplicaSets(withNew(oldRSs, newOne))
	for _, rs := range active {
		m, ok := replicasAnnotation(rs, rolloutstate.MaxReplicasAnnotation)
		if !ok || m == 0 {
			m = d.Status.Replicas
		}
		effMax[rs] = m
	}
	before := map[*appsv1.ReplicaSet]int32{}
	for _, rs := range active {
		before[rs] = specReplicas(rs)
	}
	sortNewestFirst(oldRSs)
	out := proportionalSizes(fencepostsFor(d), d.Status.Replicas, newOne, oldRSs)

	if len(out) != len(active) {
		t.Fatalf("PS-3: %d sizes for %d active ReplicaSets", len(out), len(active))
	}
	allowed := int32(0)
	if replicas > 0 {
		allowed = newMax
	}
	toAdd := allowed - sumSpecReplicas(active)
	// The direction of the scaling event: every ReplicaSet was sized for
	// at most (grew) or at least (shrank) the new maximum; 0 is neutral.
	grewDeployment, shrankDeployment := toAdd > 0, toAdd < 0
	for _, m := range effMax {
		grewDeployment = grewDeployment && m <= newMax
		shrankDeployment = shrankDeployment && (m == 0 || m >= newMax)
	}
	checkProportionalSizesOut(t, out, before, replicas, allowed, toAdd, oldMax, newMax, grewDeployment, shrankDeployment)
}

// proportionalFuzzReplicaSets builds up to maxFuzzRSs ReplicaSets of d from
// rss (3 bytes each: spec, minute, annotation mode), last sized for prev
// replicas with max-replicas oldMax (or no annotations when the mode's low bit
// is set); the one at newIdx mod (n+1) is the new ReplicaSet, if any.
func proportionalFuzzReplicaSets(d *appsv1.Deployment, prev, oldMax int32, rss []byte, newIdx uint8) (oldRSs []*appsv1.ReplicaSet, newOne *appsv1.ReplicaSet) {
	n := min(len(rss)/3, maxFuzzRSs)
	pick := int(newIdx) % (n + 1)
	for i := range n {
		spec := int32(rss[3*i]) * (1 + int32(rss[3*i+2]>>4)) % (oldMax + 1) // up to oldMax
		ann := sizeAnnotations(prev, oldMax, 0)
		if rss[3*i+2]&1 != 0 {
			ann = nil
		}
		rs := newRS(d, fmt.Sprintf("rs-%d", i), fmt.Sprintf("nginx:%d", i), spec, int(rss[3*i+1]%8), ann)
		if i == pick {
			newOne = rs
		} else {
			oldRSs = append(oldRSs, rs)
		}
	}
	return oldRSs, newOne
}

// checkProportionalSizesOut checks proportionalSizes' result (PS-3..PS-5):
// only active ReplicaSets (keys of before), once each; no negative size; all
// 0 for 0 replicas; no shrinking when the Deployment grew and no growing when
// it shrank (PS-4); the first takes the leftover max(0, allowed − rest), and
// Σ sizes = allowed unless that clamp fired.
func checkProportionalSizesOut(t *testing.T, out plan, before map[*appsv1.ReplicaSet]int32, replicas, allowed, toAdd, oldMax, newMax int32, grewDeployment, shrankDeployment bool) {
	t.Helper()
	seen := map[*appsv1.ReplicaSet]bool{}
	var sum, rest int32
	for i, s := range out {
		if _, ok := before[s.rs]; !ok || seen[s.rs] {
			t.Fatalf("PS-3: %s is not active or appears twice", s.rs.Name)
		}
		seen[s.rs] = true
		if s.size < 0 {
			t.Fatalf("PS-3: %s sized %d", s.rs.Name, s.size)
		}
		if replicas == 0 && s.size != 0 {
			t.Fatalf("PS-5: 0 replicas, yet %s keeps %d", s.rs.Name, s.size)
		}
		sum += s.size
		if i > 0 {
			rest += s.size
		}
		if grewDeployment && s.size < before[s.rs] {
			t.Fatalf("PS-4 scale up (toAdd %d, max %d → %d): %s shrinks %d → %d", toAdd, oldMax, newMax, s.rs.Name, before[s.rs], s.size)
		}
		if shrankDeployment && s.size > before[s.rs] {
			t.Fatalf("PS-4 scale down (toAdd %d, max %d → %d): %s grows %d → %d", toAdd, oldMax, newMax, s.rs.Name, before[s.rs], s.size)
		}
	}
	if len(out) > 0 {
		if want := max(0, allowed-rest); out[0].size != want {
			t.Fatalf("PS-3 leftover: first ReplicaSet %s = %d, want max(0, %d − %d)", out[0].rs.Name, out[0].size, allowed, rest)
		}
		if sum != allowed && out[0].size != 0 {
			t.Fatalf("PS-3: Σ sizes %d ≠ replicas+maxSurge %d without the leftover clamp", sum, allowed)
		}
	}
}

// TestProportionalSizesLeftoverClamp records a property the spec does NOT
// give (so it is skipped): "Σ sizes = replicas + maxSurge". PS-3 clamps the
// leftover of the first ReplicaSet at 0, and with several small ReplicaSets
// whose rounded fractions are all 0 the leftover is larger than the first
// ReplicaSet: four ReplicaSets of 1 (maxSurge 0, max-replicas 4) scaled
// 4 → 2 give [0 1 1 1], Σ 3 > replicas + maxSurge = 2 — until the next
// rolling pass scales old ReplicaSets down. Upstream behaves the same.
func TestProportionalSizesLeftoverClamp(t *testing.T) {
	t.Skip("PS-3 as specified: the leftover clamp lets Σ sizes exceed replicas+maxSurge; kept as a documented counterexample")
	d := fuzzDeployment(2, intstr.FromInt32(0), intstr.FromInt32(1), false)
	var old []*appsv1.ReplicaSet
	for i := range 4 {
		old = append(old, newRS(d, fmt.Sprintf("v%d", i), fmt.Sprintf("nginx:%d", i), 1, i, sizeAnnotations(4, 4, 0)))
	}
	sortNewestFirst(old)
	var sum int32
	for _, s := range proportionalSizes(fencepostsFor(d), d.Status.Replicas, nil, old) {
		sum += s.size
	}
	if sum != 2 {
		t.Errorf("Σ sizes = %d, want replicas+maxSurge = 2", sum)
	}
}

// TestSyncProportionalScalingInt32Overflow is a bug the fuzzer found
// (FuzzSyncDeploymentBadInput, minimized by hand): PS-5 as upstream computes
// spec(rs) × (replicas + maxSurge) as an int32 product, which overflows once
// it exceeds 2³¹−1. A valid Deployment scaled 40000 → 70000 (25%/25%, so
// the new maximum is 87500) with old A = 25000 and new B = 25000, both last
// sized for max 50000, must go to about 43750 each (Σ 87500); with the int32
// product it gave B = 129649 and A = −42149 (a write the API rejects, VA-13)
// and Σ spec = 154649. replicaSetFraction now multiplies in int64 and
// clamps.
func TestSyncProportionalScalingInt32Overflow(t *testing.T) {
	d := newDeployment(70000, intstr.FromString("25%"), intstr.FromString("25%"))
	oldRS := withStatus(newRS(d, "a", "nginx:old", 25000, 0, sizeAnnotations(40000, 50000, 1)), 25000, 25000)
	newOne := withStatus(newRS(d, "b", "nginx:1.14.2", 25000, 1, sizeAnnotations(40000, 50000, 2)), 25000, 25000)
	fx := newFixture(t, d, oldRS, newOne)
	_, err := fx.sync()
	t.Logf("sync: %v", err)
	for _, rs := range fx.replicaSets() { // the fake API server accepts what the real one rejects
		if n := *rs.Spec.Replicas; n < 0 || n > 87500 {
			t.Errorf("%s: replicas %d outside [0, replicas + maxSurge = 87500]", rs.Name, n)
		}
	}
}

// ---------------------------------------------------------------------------
// Bad input never crashes a sync.

// FuzzSyncDeploymentBadInput runs one syncDeployment (directly, so a panic
// fails the test instead of being recovered by the runner) over a fuzzed
// Deployment with fuzzed ReplicaSets and pods: odd ownerReferences, huge,
// zero, negative and nil replicas, malformed rolloutstate.Fenceposts ("150%", "-5%",
// "abc"), nil/empty/non-matching/invalid selectors, colliding
// pod-template-hash names, nil rollingUpdate, deletionTimestamps, garbage
// annotations. Properties: the sync returns (any error is fine); when the
// input would pass API validation (VA-3..VA-8, VA-12, VA-13), no written
// ReplicaSet has nil or negative replicas (VA-13) and every created one has
// a selector matching its template (VA-5) and a name of at most 253
// characters (OM-21); the number of ReplicaSet creates is at most 1 (RU-13).
func FuzzSyncDeploymentBadInput(f *testing.F) {
	// replicas, strategy, maxSurge, maxUnavailable, selector mode, flags, RSs (6 bytes each), pods (3 bytes each)
	f.Add(int32(3), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{}, []byte{})
	f.Add(int32(10), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 1, 10, 10, 0, 0, 0, 0, 3, 0, 0, 1}, []byte{1, 0, 0})
	f.Add(int32(-3), uint8(0), "150%", "-5%", uint8(0), uint8(0), []byte{0, 0, 255, 0, 1, 0}, []byte{})
	f.Add(int32(math.MaxInt32), uint8(0), "abc", "5", uint8(0), uint8(0), []byte{0, 1, 4, 0, 2, 0, 0, 0, 4, 0, 2, 1}, []byte{})
	f.Add(int32(0), uint8(1), "", "", uint8(1), uint8(1), []byte{1, 0, 1, 0, 3, 0}, []byte{1, 1, 1})
	f.Add(int32(5), uint8(2), "0", "0", uint8(2), uint8(2), []byte{2, 2, 2, 2, 4, 1, 3, 0, 3, 3, 5, 2}, []byte{2, 2, 2})
	f.Add(int32(5), uint8(3), "1", "1", uint8(3), uint8(4), []byte{4, 3, 5, 5, 6, 3, 5, 1, 6, 6, 7, 4}, []byte{3, 3, 3})
	f.Add(int32(5), uint8(4), "1", "1", uint8(4), uint8(8), []byte{6, 0, 7, 7, 8, 5}, []byte{4, 4, 4})
	f.Add(int32(5), uint8(5), "1", "1", uint8(5), uint8(16), []byte{0, 0, 3, 3, 0, 0, 0, 1, 3, 3, 0, 0, 0, 2, 3, 3, 0, 0}, []byte{})
	f.Add(int32(7), uint8(0), "33%", "0%", uint8(0), uint8(32|64), []byte{0, 0, 7, 7, 0, 0, 0, 1, 7, 7, 1, 0}, []byte{})
	f.Add(int32(4), uint8(0), "0%", "0", uint8(0), uint8(128), []byte{0, 1, 4, 4, 0, 0, 0, 1, 4, 4, 0, 1}, []byte{})
	// Mostly valid inputs that reach each strategy step. ReplicaSet bytes: owner, template (0 new,
	// 1 and 6 old), size (%5 ∈ {0, 4}: as is), status (replicas | available<<4), annotations (1, 6,
	// 11: desired 1/6/11 with revision 1/2/3; 4: desired = replicas), age.
	f.Add(int32(5), uint8(2), "", "", uint8(0), uint8(0), []byte{0, 1, 5, 0x55, 4, 0}, []byte{0, 0, 3})                                     // Recreate: old scaled down
	f.Add(int32(5), uint8(2), "", "", uint8(0), uint8(0), []byte{0, 1, 0, 0, 4, 0, 0, 0, 5, 0x55, 4, 1}, []byte{1, 0, 3})                   // Recreate: new RS exists
	f.Add(int32(5), uint8(0), "25%", "25%", uint8(0), uint8(8), []byte{0, 1, 5, 0x55, 6, 0, 0, 0, 5, 0x55, 11, 1}, []byte{})                // rollback to the previous revision
	f.Add(int32(10), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 1, 5, 0x55, 6, 0, 0, 0, 4, 0x44, 6, 1}, []byte{})                // scaling event, proportional
	f.Add(int32(8), uint8(0), "25%", "25%", uint8(0), uint8(2), []byte{0, 1, 5, 0x55, 6, 0, 0, 0, 4, 0x44, 6, 1}, []byte{})                 // paused, proportional
	f.Add(int32(4), uint8(0x80), "1", "0", uint8(0), uint8(128), []byte{0, 0, 4, 0x44, 4, 1, 0, 1, 0, 0, 1, 0, 0, 6, 0, 0, 6, 2}, []byte{}) // complete: history cleanup (limit 0)
	f.Add(int32(10), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 1, 10, 0xAA, 4, 0, 0, 0, 0, 0, 4, 1}, []byte{})                  // RU-16: scale the new RS up
	f.Add(int32(10), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 1, 10, 0xAA, 4, 0, 0, 0, 4, 0x04, 4, 1}, []byte{})               // RU-16: scale old down
	f.Add(int32(3), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 2, 3, 0x33, 4, 0}, []byte{})                                      // RV-10: hash-name collision
	f.Add(int32(6), uint8(2), "", "", uint8(0), uint8(0), []byte{0, 1, 5, 0x55, 1, 0, 0, 0, 4, 0x44, 1, 1}, []byte{})                       // IM-3: Recreate scaling event
	// A valid Deployment near MaxInt32 replicas in a scaling event with two active ReplicaSets.
	f.Add(int32(math.MaxInt32), uint8(0), "25%", "25%", uint8(0), uint8(0), []byte{0, 1, 5, 0x55, 1, 0, 0, 6, 10, 0x55, 1, 1}, []byte{})
	f.Fuzz(checkSyncDeploymentBadInput)
}

// checkSyncDeploymentBadInput is FuzzSyncDeploymentBadInput's body: one sync
// over the decoded objects must return; then OM-21, VA-13, VA-5 (valid input
// only) on every written ReplicaSet, and at most one create (RU-13).
func checkSyncDeploymentBadInput(t *testing.T, replicas int32, strategy uint8, surge, unavailable string, selectorMode, flags uint8, rssData, podData []byte) {
	t.Helper()
	d := badDeployment(replicas, strategy, surge, unavailable, selectorMode, flags)
	objs := []runtime.Object{d}
	rss := badReplicaSets(d, rssData)
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	for _, p := range badPods(d, rss, podData) {
		objs = append(objs, p)
	}
	fx := newFixture(t, objs...)
	_, _ = fx.sync() // must return, with or without an error

	valid := deploymentValid(d)
	for _, rs := range rss {
		valid = valid && replicaSetValid(rs)
	}
	creates, written := replicaSetWrites(fx)
	for name := range written { // the stored result, however it was written
		rs, err := fx.Client.AppsV1().ReplicaSets("ns").Get(fx.Ctx, name, metav1.GetOptions{})
		if err != nil {
			continue // the write failed
		}
		if len(rs.Name) > 253 {
			t.Fatalf("OM-21: ReplicaSet name has %d characters", len(rs.Name))
		}
		if !valid {
			continue
		}
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas < 0 {
			t.Fatalf("VA-13: wrote ReplicaSet %s with replicas %v from a valid Deployment %s", rs.Name, ptrString(rs.Spec.Replicas), describe(d))
		}
		if !controllertest.SelectorMatchesTemplate(rs.Spec.Selector, rs.Spec.Template.Labels) {
			t.Fatalf("VA-5: wrote ReplicaSet %s: selector %v does not match template labels %v", rs.Name, rs.Spec.Selector, rs.Spec.Template.Labels)
		}
	}
	if creates > 1 {
		t.Fatalf("RU-13: %d ReplicaSet creates in one sync", creates)
	}
}

// replicaSetWrites counts the ReplicaSet creates among fx's client actions
// and names every ReplicaSet created, updated or patched (status
// subresource writes left out).
func replicaSetWrites(fx *fixture) (int, map[string]bool) {
	creates, written := 0, map[string]bool{}
	for _, a := range fx.Client.Actions() {
		if a.GetResource().Resource != "replicasets" || a.GetSubresource() != "" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.CreateAction:
			creates++
			written[a.GetObject().(*appsv1.ReplicaSet).Name] = true
		case clienttesting.UpdateAction:
			written[a.GetObject().(*appsv1.ReplicaSet).Name] = true
		case clienttesting.PatchAction:
			written[a.GetName()] = true
		}
	}
	return creates, written
}

func ptrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(int(*p))
}

func describe(d *appsv1.Deployment) string {
	return fmt.Sprintf("(replicas %s, strategy %+v, paused %v)", ptrString(d.Spec.Replicas), d.Spec.Strategy, d.Spec.Paused)
}

// badIntOrString is nil for "", an int when s is a decimal integer, else the
// string itself ("150%", "-5%", "abc").
func badIntOrString(s string) *intstr.IntOrString {
	if s == "" {
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return ptr.To(intstr.FromInt32(int32(n)))
	}
	return ptr.To(intstr.FromString(s))
}

// badDeployment is ns/nginx with fuzzed replicas, strategy (mod 6:
// 0 RollingUpdate, 1 RollingUpdate without rollingUpdate, 2 Recreate,
// 3 Recreate with rollingUpdate, 4 "", 5 "Bogus"; bit 0x80:
// revisionHistoryLimit 0), rolloutstate.Fenceposts and selector (0 matching,
// 1 nil, 2 empty, 3 not matching the template, 4 invalid operator,
// 5 matchExpressions). flags: 1 nil replicas, 2 paused, 4 deletionTimestamp,
// 8 rollback annotation "0", 16 rollback annotation "abc", 32 collisionCount,
// 64 minReadySeconds and no progress deadline, 128 stored status counts.
func badDeployment(replicas int32, strategy uint8, surge, unavailable string, selectorMode, flags uint8) *appsv1.Deployment {
	d := newDeployment(replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	ru := &appsv1.RollingUpdateDeployment{MaxSurge: badIntOrString(surge), MaxUnavailable: badIntOrString(unavailable)}
	if strategy&0x80 != 0 {
		d.Spec.RevisionHistoryLimit = ptr.To(int32(0))
	}
	switch strategy % 6 {
	case 0:
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: ru}
	case 1:
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	case 2:
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	case 3:
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: ru}
	case 4:
		d.Spec.Strategy = appsv1.DeploymentStrategy{RollingUpdate: ru}
	case 5:
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "Bogus"}
	}
	d.Spec.Selector = controllertest.FuzzSelector(selectorMode, d.Spec.Selector, "nginx")
	if flags&1 != 0 {
		d.Spec.Replicas = nil
	}
	d.Spec.Paused = flags&2 != 0
	if flags&4 != 0 {
		d.DeletionTimestamp = ptr.To(metav1.NewTime(baseTime))
	}
	switch {
	case flags&8 != 0:
		d.Annotations = map[string]string{rolloutstate.RollbackToAnnotation: "0"}
	case flags&16 != 0:
		d.Annotations = map[string]string{rolloutstate.RollbackToAnnotation: "abc", rolloutstate.RevisionAnnotation: "-1"}
	}
	if flags&32 != 0 {
		d.Status.CollisionCount = ptr.To(int32(replicas))
	}
	if flags&64 != 0 {
		d.Spec.MinReadySeconds = 5
		d.Spec.ProgressDeadlineSeconds = nil
	}
	if flags&128 != 0 {
		d.Generation = 3
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 4, AvailableReplicas: 4, ReadyReplicas: 4}
	}
	return d
}

// badReplicaSets decodes up to 6 ReplicaSets, 6 bytes each: owner mode,
// template mode, replicas mode, status, annotation mode, age/deletion.
func badReplicaSets(d *appsv1.Deployment, data []byte) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	names := map[string]bool{}
	for i := 0; i+6 <= len(data) && len(out) < 6; i += 6 {
		owner, tmpl, size, status, ann, age := data[i], data[i+1], data[i+2], data[i+3], data[i+4], data[i+5]
		name := fmt.Sprintf("nginx-rs%d", i/6)
		image := fmt.Sprintf("nginx:%d", tmpl%4)
		switch tmpl % 5 {
		case 0:
			image = "nginx:1.14.2" // the Deployment's template: a new ReplicaSet
		case 2: // the name the Deployment's new ReplicaSet would get, another template (RV-10)
			name = replicaSetName(d.Name, computeHash(&d.Spec.Template, d.Status.CollisionCount))
		}
		if names[name] {
			continue
		}
		names[name] = true
		rs := withStatus(newRS(d, name, image, int32(size), int(age%8), nil), int32(status%16), int32(status/16))
		if tmpl%5 == 3 { // labels that do not match the Deployment's selector
			rs.Spec.Template.Labels = map[string]string{"app": "other"}
			rs.Labels = rs.Spec.Template.Labels
			rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		}
		if tmpl%5 == 4 {
			rs.Spec.Selector = nil
		}
		switch size % 5 {
		case 1:
			rs.Spec.Replicas = nil
		case 2:
			rs.Spec.Replicas = ptr.To(-int32(size))
		case 3:
			rs.Spec.Replicas = ptr.To(int32(math.MaxInt32 - int32(size)))
		}
		setBadOwner(rs, d, owner)
		rs.Annotations = badAnnotations(d, ann)
		if age&8 != 0 {
			rs.Status.TerminatingReplicas = nil
			rs.Status.ObservedGeneration = int64(age % 3)
		}
		out = append(out, rs)
	}
	return out
}

// setBadOwner applies badReplicaSets' owner mode (mod 8) to rs: 0 owned by
// d, 1 orphan, 2 a missing owner UID, 3 a second controller, 4 a
// StatefulSet controller, 5 not a controller reference, 6 the owner's UID,
// 7 being deleted.
func setBadOwner(rs *appsv1.ReplicaSet, d *appsv1.Deployment, owner byte) {
	ref := func(kind string, uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: d.Name, UID: uid, Controller: ptr.To(controller)}
	}
	switch owner % 8 {
	case 1:
		rs.OwnerReferences = nil // orphan
	case 2:
		rs.OwnerReferences = []metav1.OwnerReference{ref("Deployment", "missing-uid", true)}
	case 3:
		rs.OwnerReferences = append(rs.OwnerReferences, ref("Deployment", "other-uid", true))
	case 4:
		rs.OwnerReferences = []metav1.OwnerReference{ref("StatefulSet", d.UID, true)}
	case 5:
		rs.OwnerReferences = []metav1.OwnerReference{ref("Deployment", d.UID, false)}
	case 6:
		rs.UID = d.UID // same UID as its owner
	case 7:
		rs.DeletionTimestamp = ptr.To(metav1.NewTime(baseTime))
	}
}

// badAnnotations is badReplicaSets' annotation mode (mod 5): none, valid
// size annotations, garbage, out-of-range values, or desired = d's replicas.
func badAnnotations(d *appsv1.Deployment, ann byte) map[string]string {
	annotations := []map[string]string{
		nil,
		sizeAnnotations(int32(ann), int32(ann)+1, int(ann%4)),
		{rolloutstate.DesiredReplicasAnnotation: "-1", rolloutstate.MaxReplicasAnnotation: "abc", rolloutstate.RevisionAnnotation: "x"},
		{rolloutstate.DesiredReplicasAnnotation: "4294967295", rolloutstate.MaxReplicasAnnotation: "0", rolloutstate.RevisionAnnotation: "9223372036854775807"},
		{rolloutstate.DesiredReplicasAnnotation: strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1))), rolloutstate.MaxReplicasAnnotation: "2147483647"},
	}
	return annotations[int(ann)%len(annotations)]
}

// badPods decodes up to 8 pods, 3 bytes each: ReplicaSet index (past the
// end: orphan or a foreign controller), phase/deletion, labels.
func badPods(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, data []byte) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; i+3 <= len(data) && len(out) < 8; i += 3 {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%d", i/3), Namespace: "ns", UID: types.UID(fmt.Sprintf("pod-uid-%d", i/3)),
			Labels: map[string]string{"app": "nginx"}, CreationTimestamp: metav1.NewTime(baseTime),
		}}
		if idx := int(data[i]); idx < len(rss) {
			rs := rss[idx]
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
			p.Labels = rs.Spec.Template.Labels
		} else if idx%2 == 1 {
			p.OwnerReferences = []metav1.OwnerReference{
				{Kind: "ReplicaSet", Name: "x", UID: "x", Controller: ptr.To(true)},
				{Kind: "ReplicaSet", Name: "y", UID: d.UID, Controller: ptr.To(true)},
			}
		}
		switch data[i+1] % 4 {
		case 1:
			p.Status.Phase = v1.PodSucceeded
		case 2:
			p.DeletionTimestamp = ptr.To(metav1.NewTime(baseTime))
		case 3:
			p.Status.Phase = v1.PodRunning
		}
		if data[i+2]%3 == 1 {
			p.Labels = nil
		}
		out = append(out, p)
	}
	return out
}

// deploymentValid reports whether d would pass the API validation the
// controller relies on (VA-3..VA-8, VA-12).
func deploymentValid(d *appsv1.Deployment) bool {
	if !controllertest.SpecValid(d.Spec.Replicas, d.Spec.Selector, d.Spec.Template.Labels) {
		return false
	}
	s := d.Spec.Strategy
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return false
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return false
		}
		surge, okS := fencepostValue(s.RollingUpdate.MaxSurge)
		unav, okU := fencepostValue(s.RollingUpdate.MaxUnavailable)
		if !okS || !okU || (surge == 0 && unav == 0) {
			return false
		}
		if u := s.RollingUpdate.MaxUnavailable; u.Type == intstr.String && unav > 100 {
			return false
		}
	default:
		return false
	}
	st := d.Status
	return st.Replicas >= 0 && st.AvailableReplicas >= 0 && st.ReadyReplicas >= 0 && st.UpdatedReplicas >= 0 &&
		st.AvailableReplicas <= st.Replicas && st.ReadyReplicas <= st.Replicas && st.UpdatedReplicas <= st.Replicas &&
		ptr.Deref(st.CollisionCount, 0) >= 0
}

// fencepostValue returns a VA-8-valid maxSurge/maxUnavailable value (the
// int, or the percent number) and whether it is valid; nil is not (VA-1
// defaults it).
func fencepostValue(v *intstr.IntOrString) (int64, bool) {
	if v == nil {
		return 0, false
	}
	if v.Type == intstr.Int {
		return int64(v.IntVal), v.IntVal >= 0
	}
	if !validPercent.MatchString(v.StrVal) {
		return 0, false
	}
	n, err := strconv.ParseInt(v.StrVal[:len(v.StrVal)-1], 10, 32)
	return n, err == nil
}

// replicaSetValid reports whether rs would pass VA-13, status included.
func replicaSetValid(rs *appsv1.ReplicaSet) bool {
	if !controllertest.SpecValid(rs.Spec.Replicas, rs.Spec.Selector, rs.Spec.Template.Labels) {
		return false
	}
	st := rs.Status
	return st.Replicas >= 0 && st.AvailableReplicas >= 0 && st.ReadyReplicas >= 0 &&
		st.AvailableReplicas <= st.ReadyReplicas && st.ReadyReplicas <= st.Replicas
}
