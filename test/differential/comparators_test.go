package differential

import (
	"reflect"
	"strings"
	"testing"
)

// TestRollingDiffs: the rolling-phase comparison accepts timing-only differences and reports every real one
// (runs without clusters, also under -short).
func TestRollingDiffs(t *testing.T) {
	b := bounds{maxTotal: 13, minAvailable: 8}
	ref := phase{name: "p", maxTotal: 13, minAvailable: 8, sizes: map[string][]int32{
		"rs(new)": {0, 3, 5, 7, 10}, "rs(old)": {10, 8, 6, 0},
	}}
	tests := []struct {
		name  string
		sizes map[string][]int32
		max   int32
		min   int32
		want  []string // substrings, one per expected difference; none means equal
	}{
		{name: "same", sizes: ref.sizes, max: 13, min: 8},
		{name: "other intermediate steps", sizes: map[string][]int32{"rs(new)": {0, 3, 5, 10}, "rs(old)": {10, 8, 3, 0}}, max: 13, min: 8},
		{name: "first step differs", sizes: map[string][]int32{"rs(new)": {0, 2, 5, 10}, "rs(old)": {10, 8, 0}}, max: 13, min: 8,
			want: []string{"rs(new): first steps"}},
		{name: "old first step differs", sizes: map[string][]int32{"rs(new)": {0, 3, 5, 10}, "rs(old)": {10, 7, 0}}, max: 13, min: 8,
			want: []string{"rs(old): first steps"}},
		{name: "final differs", sizes: map[string][]int32{"rs(new)": {0, 3, 5, 9}, "rs(old)": {10, 8, 0}}, max: 13, min: 8,
			want: []string{"rs(new): final size"}},
		{name: "not monotonic", sizes: map[string][]int32{"rs(new)": {0, 3, 5, 4, 10}, "rs(old)": {10, 8, 0}}, max: 13, min: 8,
			want: []string{"rs(new): direction"}},
		{name: "extra ReplicaSet", sizes: map[string][]int32{"rs(new)": {0, 3, 5, 10}, "rs(old)": {10, 8, 0}, "rs(x)": {0}}, max: 13, min: 8,
			want: []string{"ReplicaSets differ"}},
		{name: "surge bound", sizes: ref.sizes, max: 14, min: 8, want: []string{"ours broke the bounds"}},
		{name: "availability bound", sizes: ref.sizes, max: 13, min: 7, want: []string{"ours broke the bounds"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rollingDiffs(ref, phase{name: "p", sizes: tc.sizes, maxTotal: tc.max, minAvailable: tc.min}, b)
			assertDiffs(t, got, tc.want)
		})
	}
}

// TestEventsRollingDiffs: ScalingReplicaSet events compare by (ReplicaSet, direction), all others exactly.
func TestEventsRollingDiffs(t *testing.T) {
	scaled := func(msg string) eventKey {
		return eventKey{Source: "deployment-controller", Type: "Normal", Reason: "ScalingReplicaSet", Message: msg}
	}
	rollback := eventKey{Source: "deployment-controller", Type: "Normal", Reason: "DeploymentRollback", Message: `Rolled back deployment "web" to revision 1`}
	ref := []eventKey{scaled("Scaled up replica set rs(b) from 0 to 3"), scaled("Scaled down replica set rs(a) from 10 to 8"),
		scaled("Scaled up replica set rs(b) from 3 to 10"), rollback}
	tests := []struct {
		name string
		ours []eventKey
		want []string
	}{
		{name: "same", ours: ref},
		{name: "other steps", ours: []eventKey{rollback, scaled("Scaled up replica set rs(b) from 0 to 3"),
			scaled("Scaled up replica set rs(b) from 3 to 5"), scaled("Scaled down replica set rs(a) from 10 to 0")}},
		{name: "missing direction", ours: []eventKey{scaled("Scaled up replica set rs(b) from 0 to 10"), rollback},
			want: []string{"rs(a) down"}},
		{name: "missing rollback", ours: ref[:3], want: []string{"DeploymentRollback"}},
		{name: "rollback twice", ours: append(append([]eventKey{}, ref...), rollback), want: []string{"×2"}},
		{name: "other emitter", ours: []eventKey{scaled("Scaled up replica set rs(b) from 0 to 3"), scaled("Scaled down replica set rs(a) from 10 to 8"),
			{Source: "kubedeploy", Type: "Normal", Reason: "ScalingReplicaSet", Message: "Scaled up replica set rs(b) from 3 to 10"}, rollback},
			want: []string{"kubedeploy Normal ScalingReplicaSet rs(b) up"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertDiffs(t, eventsRollingDiffs(ref, tc.ours), tc.want)
		})
	}
}

// assertDiffs checks that got has exactly one difference per wanted substring, in order.
func assertDiffs(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d differences, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("difference %d = %q, want it to mention %q", i, got[i], w)
		}
	}
}

// TestProgressedMessageLag: the Recreate relaxation rewrites only upstream's Progressing message, only from the
// old ReplicaSet's name to the new one's, and only when that makes it ours; nothing else is touched.
func TestProgressedMessageLag(t *testing.T) {
	snap := func(progressing string) snapshot {
		return snapshot{Replicas: 3, Conditions: []condState{
			{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
			{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable", Message: progressing}}}
	}
	old, cur := `ReplicaSet "rs(a)" has successfully progressed.`, `ReplicaSet "rs(b)" has successfully progressed.`
	if got := progressedMessageLag(snap(old), snap(cur), `"rs(a)"`, `"rs(b)"`); !reflect.DeepEqual(got, snap(cur)) {
		t.Errorf("lagging message not forgiven: %+v", got)
	}
	if got := progressedMessageLag(snap(cur), snap(old), `"rs(a)"`, `"rs(b)"`); !reflect.DeepEqual(got, snap(cur)) {
		t.Errorf("ours lagging must still differ, got upstream rewritten to %+v", got)
	}
	other := `ReplicaSet "rs(c)" has successfully progressed.`
	if got := progressedMessageLag(snap(other), snap(cur), `"rs(a)"`, `"rs(b)"`); !reflect.DeepEqual(got, snap(other)) {
		t.Errorf("a message naming a third ReplicaSet was rewritten: %+v", got)
	}
	up := snap(old)
	progressedMessageLag(up, snap(cur), `"rs(a)"`, `"rs(b)"`)
	if up.Conditions[1].Message != old {
		t.Error("progressedMessageLag changed its argument")
	}
}
