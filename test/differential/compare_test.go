package differential

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// lines renders v (a struct, map or slice of comparable values) as sorted "path=value" lines so two values can
// be diffed line by line.
func lines(prefix string, v reflect.Value) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, lines(prefix+"."+v.Type().Field(i).Name, v.Field(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, lines(fmt.Sprintf("%s[%v]", prefix, k), v.MapIndex(k))...)
		}
		sort.Strings(out)
		return out
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, lines(fmt.Sprintf("%s[%d]", prefix, i), v.Index(i))...)
		}
		if v.Len() == 0 {
			out = append(out, prefix+"=[]")
		}
		return out
	default:
		return []string{fmt.Sprintf("%s=%v", prefix, v.Interface())}
	}
}

// diffLines returns the lines only in a (prefixed "upstream: ") and only in b (prefixed "ours:     ").
func diffLines(a, b []string) []string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "upstream: "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "ours:     "+l)
		}
	}
	return out
}

// sameExactly fails t when up and ours differ, listing the differing lines.
func sameExactly(t *testing.T, what string, up, ours any) {
	t.Helper()
	if reflect.DeepEqual(up, ours) {
		return
	}
	d := diffLines(lines(what, reflect.ValueOf(up)), lines(what, reflect.ValueOf(ours)))
	t.Errorf("%s differs:\n  %s", what, strings.Join(d, "\n  "))
}

// samePhaseExactly compares a phase whose ReplicaSet sizes do not depend on pod-readiness timing (creation,
// Recreate, proportional scaling of a stuck rollout, maxUnavailable 0 with maxSurge 1, paused scaling): every
// ReplicaSet's whole size sequence must be equal, and the Recreate no-overlap flag too.
func samePhaseExactly(t *testing.T, up, ours phase) {
	t.Helper()
	sameExactly(t, "phase "+up.name+" sizes", up.sizes, ours.sizes)
	if up.overlap != ours.overlap {
		t.Errorf("phase %s: two ReplicaSets with pods at once: upstream %v, ours %v", up.name, up.overlap, ours.overlap)
	}
}

// bounds are a rolling update's safety bounds in replicas: spec.replicas+maxSurge and spec.replicas-maxUnavailable.
type bounds struct{ maxTotal, minAvailable int32 }

// samePhaseRolling compares a rolling-update phase whose intermediate sizes depend on when pods become ready.
// Relaxations, and why they are safe:
//   - Only a deterministic prefix of each sequence is compared exactly: for a ReplicaSet scaled up, its first two
//     changes (RU-16 steps 1–2: created at maxSurge, then grown by the maxUnavailable the old ReplicaSet freed,
//     both decided before any new pod can count as available); for one scaled down, its first change (RU-16 step
//     1). Later steps are sized by how many new pods happened to be available at each sync.
//   - Instead, each sequence must move in one direction only, the direction and the final size must match, and
//     both implementations must keep the bounds at every change the watch saw.
func samePhaseRolling(t *testing.T, up, ours phase, b bounds) {
	t.Helper()
	for _, d := range rollingDiffs(up, ours, b) {
		t.Error(d)
	}
}

// rollingDiffs returns the differences samePhaseRolling reports, one line each.
func rollingDiffs(up, ours phase, b bounds) []string {
	if !slices.Equal(sortedKeys(up.sizes), sortedKeys(ours.sizes)) {
		return []string{fmt.Sprintf("phase %s: ReplicaSets differ: upstream %v, ours %v", up.name, up.sizes, ours.sizes)}
	}
	var out []string
	for _, label := range sortedKeys(up.sizes) {
		u, o := up.sizes[label], ours.sizes[label]
		if last(u) != last(o) {
			out = append(out, fmt.Sprintf("phase %s %s: final size upstream %d, ours %d (upstream %v, ours %v)", up.name, label, last(u), last(o), u, o))
		}
		du, do := direction(u), direction(o)
		if du != do || du == "both" {
			out = append(out, fmt.Sprintf("phase %s %s: direction upstream %s %v, ours %s %v (want one and the same)", up.name, label, du, u, do, o))
			continue
		}
		n := map[string]int{"up": 3, "down": 2}[du]
		if pu, po := prefix(u, n), prefix(o, n); !slices.Equal(pu, po) {
			out = append(out, fmt.Sprintf("phase %s %s: first steps upstream %v, ours %v (full: upstream %v, ours %v)", up.name, label, pu, po, u, o))
		}
	}
	for _, p := range []struct {
		who string
		ph  phase
	}{{"upstream", up}, {"ours", ours}} {
		if p.ph.maxTotal > b.maxTotal || p.ph.minAvailable < b.minAvailable {
			out = append(out, fmt.Sprintf("phase %s: %s broke the bounds: max total %d (limit %d), min available %d (limit %d)",
				up.name, p.who, p.ph.maxTotal, b.maxTotal, p.ph.minAvailable, b.minAvailable))
		}
	}
	return out
}

// direction returns "up", "down", "none" or "both" for a size sequence.
func direction(seq []int32) string {
	up, down := false, false
	for i := 1; i < len(seq); i++ {
		up = up || seq[i] > seq[i-1]
		down = down || seq[i] < seq[i-1]
	}
	switch {
	case up && down:
		return "both"
	case up:
		return "up"
	case down:
		return "down"
	}
	return "none"
}

func prefix(seq []int32, n int) []int32 { return seq[:min(n, len(seq))] }

func last(seq []int32) int32 { return seq[len(seq)-1] }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// multiset returns events as sorted "event ×count" lines.
func multiset(events []eventKey) []string {
	counts := map[string]int{}
	for _, e := range events {
		counts[e.String()]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(out)
	return out
}

// sameEventsExactly compares the multisets of Deployment events (emitter, type, reason, normalized message);
// arrival order is not compared because two controllers' broadcasters may interleave, and names, timestamps and
// counts aside as the issue says.
func sameEventsExactly(t *testing.T, up, ours []eventKey) {
	t.Helper()
	if d := diffLines(multiset(up), multiset(ours)); len(d) > 0 {
		t.Errorf("Deployment events differ:\n  %s", strings.Join(d, "\n  "))
	}
}

var scaledRE = regexp.MustCompile(`^Scaled (up|down) replica set (\S+) from \d+ to \d+$`)

// sameEventsRolling compares events of scenarios with timing-dependent rolling phases: every event other than
// ScalingReplicaSet exactly (as a multiset); ScalingReplicaSet events only as the set of (emitter, type,
// ReplicaSet, direction), because how many steps a rolling update takes depends on pod-readiness timing.
func sameEventsRolling(t *testing.T, up, ours []eventKey) {
	t.Helper()
	for _, d := range eventsRollingDiffs(up, ours) {
		t.Error(d)
	}
}

// eventsRollingDiffs returns the differences sameEventsRolling reports.
func eventsRollingDiffs(up, ours []eventKey) []string {
	split := func(events []eventKey) (other []eventKey, scaling []string) {
		set := map[string]bool{}
		for _, e := range events {
			m := scaledRE.FindStringSubmatch(e.Message)
			if e.Reason != "ScalingReplicaSet" || m == nil {
				other = append(other, e)
				continue
			}
			set[fmt.Sprintf("%s %s ScalingReplicaSet %s %s", e.Source, e.Type, m[2], m[1])] = true
		}
		return other, sortedKeys(set)
	}
	uo, us := split(up)
	oo, os := split(ours)
	var out []string
	if d := diffLines(multiset(uo), multiset(oo)); len(d) > 0 {
		out = append(out, "Deployment events differ:\n  "+strings.Join(d, "\n  "))
	}
	if d := diffLines(us, os); len(d) > 0 {
		out = append(out, "ScalingReplicaSet (ReplicaSet, direction) sets differ:\n  "+strings.Join(d, "\n  "))
	}
	return out
}

// wantSizes asserts that both clusters' phase p saw exactly the size sequences of a spec worked example, so
// that the comparison is anchored to the spec and cannot pass because both sides did nothing. With prefixOnly,
// only the first len(want[label]) values are checked (rolling phases, see samePhaseRolling).
func wantSizes(t *testing.T, up, ours phase, want map[string][]int32, prefixOnly bool) {
	t.Helper()
	for _, p := range []struct {
		who string
		ph  phase
	}{{"upstream", up}, {"ours", ours}} {
		if !prefixOnly && !slices.Equal(sortedKeys(p.ph.sizes), sortedKeys(want)) {
			t.Errorf("phase %s (%s): ReplicaSets %v, want %v", p.ph.name, p.who, p.ph.sizes, want)
			continue
		}
		for label, w := range want {
			got := p.ph.sizes[label]
			if prefixOnly {
				got = prefix(got, len(w))
			}
			if !slices.Equal(got, w) {
				t.Errorf("phase %s (%s) %s: sizes %v, want %v", p.ph.name, p.who, label, p.ph.sizes[label], w)
			}
		}
	}
}
