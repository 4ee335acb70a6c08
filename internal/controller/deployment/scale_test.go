package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestProportionalScaling checks the PS-7..PS-10 worked examples.
func TestProportionalScaling(t *testing.T) {
	type rsSpec struct {
		name          string
		size, maxAnno int32
		minute        int
		isNew         bool
	}
	for _, tc := range []struct {
		name           string
		from, to       int32
		surge, unavail intstr.IntOrString
		statusReplicas int32
		rss            []rsSpec
		want           map[string]int32
	}{
		{"PS-7 e2e proportional scaling 10->30", 10, 30, intstr.FromInt32(3), intstr.FromInt32(2), 13,
			[]rsSpec{{"a", 8, 13, 0, false}, {"b", 5, 13, 1, true}}, map[string]int32{"a": 20, "b": 13}},
		{"PS-8 integration 100->120", 100, 120, intstr.FromInt32(20), intstr.FromInt32(0), 120,
			[]rsSpec{{"old", 100, 120, 0, false}, {"new", 20, 120, 1, true}}, map[string]int32{"old": 117, "new": 23}},
		{"PS-9 leftover up goes to newest", 3, 4, intstr.FromInt32(0), intstr.FromInt32(0), 3,
			[]rsSpec{{"v1", 1, 3, 0, false}, {"v2", 1, 3, 1, false}, {"v3", 1, 3, 2, true}}, map[string]int32{"v1": 1, "v2": 1, "v3": 2}},
		{"PS-9 leftover down goes to oldest", 3, 2, intstr.FromInt32(0), intstr.FromInt32(0), 3,
			[]rsSpec{{"v1", 1, 3, 0, false}, {"v2", 1, 3, 1, false}, {"v3", 1, 3, 2, true}}, map[string]int32{"v1": 0, "v2": 1, "v3": 1}},
		{"PS-10 5->10", 5, 10, intstr.FromInt32(0), intstr.FromInt32(1), 5,
			[]rsSpec{{"old", 3, 5, 0, false}, {"new", 2, 5, 1, true}}, map[string]int32{"old": 6, "new": 4}},
		{"PS-10 5->3", 5, 3, intstr.FromInt32(0), intstr.FromInt32(1), 5,
			[]rsSpec{{"old", 3, 5, 0, false}, {"new", 2, 5, 1, true}}, map[string]int32{"old": 2, "new": 1}},
		{"PS-10 9->4", 9, 4, intstr.FromInt32(0), intstr.FromInt32(1), 9,
			[]rsSpec{{"old", 1, 9, 0, false}, {"new", 8, 9, 1, true}}, map[string]int32{"old": 0, "new": 4}},
		{"PS-10 7->10", 7, 10, intstr.FromInt32(0), intstr.FromInt32(1), 7,
			[]rsSpec{{"v1", 2, 7, 0, false}, {"v2", 3, 7, 1, false}, {"new", 2, 7, 2, true}}, map[string]int32{"new": 3, "v2": 4, "v1": 3}},
		{"PS-10 13->8", 13, 8, intstr.FromInt32(0), intstr.FromInt32(1), 13,
			[]rsSpec{{"v1", 3, 13, 0, false}, {"v2", 8, 13, 1, false}, {"new", 2, 13, 2, true}}, map[string]int32{"new": 1, "v2": 5, "v1": 2}},
		{"PS-10 6->0", 6, 0, intstr.FromInt32(0), intstr.FromInt32(1), 6,
			[]rsSpec{{"old", 3, 6, 0, false}, {"new", 3, 6, 1, true}}, map[string]int32{"old": 0, "new": 0}},
		{"PS-10 no newRS 4->5", 4, 5, intstr.FromInt32(0), intstr.FromInt32(1), 4,
			[]rsSpec{{"v1", 2, 4, 0, false}, {"v2", 2, 4, 1, false}}, map[string]int32{"v1": 2, "v2": 3}},
		{"PS-10 surge 2 10->20", 10, 20, intstr.FromInt32(2), intstr.FromInt32(0), 12,
			[]rsSpec{{"old", 6, 12, 0, false}, {"new", 6, 12, 1, true}}, map[string]int32{"old": 11, "new": 11}},
		{"PS-10 surge 3->6 10->50", 10, 50, intstr.FromInt32(6), intstr.FromInt32(0), 13,
			[]rsSpec{{"old", 8, 13, 0, false}, {"new", 5, 13, 1, true}}, map[string]int32{"old": 34, "new": 22}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.to, tc.surge, tc.unavail)
			d.Status.Replicas = tc.statusReplicas
			var nrs *appsv1.ReplicaSet
			var olds []*appsv1.ReplicaSet
			for _, r := range tc.rss {
				rs := newRS(d, r.name, r.name, r.size, r.minute, sizeAnnotations(tc.from, r.maxAnno, 0))
				if r.isNew {
					nrs = rs
				} else {
					olds = append(olds, rs)
				}
			}
			if activeOrLatest(nrs, olds) != nil {
				t.Fatal("expected more than one active RS")
			}
			sortNewestFirst(olds)
			got := map[string]int32{}
			for _, s := range proportionalSizes(fencepostsFor(d), d.Status.Replicas, nrs, olds) {
				got[s.rs.Name] = s.size
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s = %d, want %d (all: %v)", name, got[name], want, got)
				}
			}
		})
	}
}

func TestActiveOrLatestPS1(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	old1 := newRS(d, "old1", "a", 0, 0, nil)
	old2 := newRS(d, "old2", "b", 0, 1, nil)
	nrs := newRS(d, "new", "c", 0, 2, nil)
	if got := activeOrLatest(nil, []*appsv1.ReplicaSet{old1, old2}); got != old2 {
		t.Errorf("none active, no new: got %v, want newest old", got.Name)
	}
	if got := activeOrLatest(nrs, []*appsv1.ReplicaSet{old1, old2}); got != nrs {
		t.Errorf("none active: got %v, want new", got.Name)
	}
	old1.Spec.Replicas = ptr.To[int32](2)
	if got := activeOrLatest(nrs, []*appsv1.ReplicaSet{old1, old2}); got != old1 {
		t.Errorf("one active: got %v", got.Name)
	}
	if activeOrLatest(nil, nil) != nil {
		t.Error("no RSs")
	}
}

// TestIsSaturatedPS2: the new ReplicaSet is saturated only when its spec,
// its desired-replicas annotation and its available replicas all equal
// d.spec.replicas.
func TestIsSaturatedPS2(t *testing.T) {
	d := newDeployment(10, intstr.FromInt32(3), intstr.FromInt32(2))
	for _, tc := range []struct {
		name string
		rs   *appsv1.ReplicaSet
		want bool
	}{
		{"no new ReplicaSet", nil, false},
		{"saturated", withStatus(newRS(d, "n", "x", 10, 1, sizeAnnotations(10, 13, 2)), 10, 10), true},
		{"not all available", withStatus(newRS(d, "n", "x", 10, 1, sizeAnnotations(10, 13, 2)), 10, 9), false},
		{"sized for another count", withStatus(newRS(d, "n", "x", 10, 1, sizeAnnotations(8, 11, 2)), 10, 10), false},
		{"no desired annotation", withStatus(newRS(d, "n", "x", 10, 1, nil), 10, 10), false},
		{"spec below replicas", withStatus(newRS(d, "n", "x", 9, 1, sizeAnnotations(10, 13, 2)), 9, 10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isSaturated(10, tc.rs); got != tc.want {
				t.Errorf("isSaturated = %v, want %v", got, tc.want)
			}
		})
	}
}
