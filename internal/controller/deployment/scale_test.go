package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestProportionalScaling checks the PS-7..PS-10 worked examples.
func TestProportionalScaling(t *testing.T) {
	// rsCase is one ReplicaSet of a case, oldest first (created a minute
	// apart): its size before the scaling event and the size it must get.
	type rsCase struct {
		name       string
		size, want int32
	}
	for _, tc := range []struct {
		name           string
		from, to       int32
		surge, unavail int32
		// maxReplicas is every ReplicaSet's max-replicas annotation and
		// d.status.replicas (the sizes before the event sum to it).
		maxReplicas int32
		rss         []rsCase
		newRS       string // the new ReplicaSet's name, "" for none
	}{
		{"PS-7 e2e proportional scaling 10->30", 10, 30, 3, 2, 13, []rsCase{{"a", 8, 20}, {"b", 5, 13}}, "b"},
		{"PS-8 integration 100->120", 100, 120, 20, 0, 120, []rsCase{{"old", 100, 117}, {"new", 20, 23}}, "new"},
		{"PS-9 leftover up goes to newest", 3, 4, 0, 0, 3, []rsCase{{"v1", 1, 1}, {"v2", 1, 1}, {"v3", 1, 2}}, "v3"},
		{"PS-9 leftover down goes to oldest", 3, 2, 0, 0, 3, []rsCase{{"v1", 1, 0}, {"v2", 1, 1}, {"v3", 1, 1}}, "v3"},
		{"PS-10 5->10", 5, 10, 0, 1, 5, []rsCase{{"old", 3, 6}, {"new", 2, 4}}, "new"},
		{"PS-10 5->3", 5, 3, 0, 1, 5, []rsCase{{"old", 3, 2}, {"new", 2, 1}}, "new"},
		{"PS-10 9->4", 9, 4, 0, 1, 9, []rsCase{{"old", 1, 0}, {"new", 8, 4}}, "new"},
		{"PS-10 7->10", 7, 10, 0, 1, 7, []rsCase{{"v1", 2, 3}, {"v2", 3, 4}, {"new", 2, 3}}, "new"},
		{"PS-10 13->8", 13, 8, 0, 1, 13, []rsCase{{"v1", 3, 2}, {"v2", 8, 5}, {"new", 2, 1}}, "new"},
		{"PS-10 6->0", 6, 0, 0, 1, 6, []rsCase{{"old", 3, 0}, {"new", 3, 0}}, "new"},
		{"PS-10 no newRS 4->5", 4, 5, 0, 1, 4, []rsCase{{"v1", 2, 2}, {"v2", 2, 3}}, ""},
		{"PS-10 surge 2 10->20", 10, 20, 2, 0, 12, []rsCase{{"old", 6, 11}, {"new", 6, 11}}, "new"},
		{"PS-10 surge 3->6 10->50", 10, 50, 6, 0, 13, []rsCase{{"old", 8, 34}, {"new", 5, 22}}, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.to, intstr.FromInt32(tc.surge), intstr.FromInt32(tc.unavail))
			d.Status.Replicas = tc.maxReplicas
			var nrs *appsv1.ReplicaSet
			var olds []*appsv1.ReplicaSet
			for minute, r := range tc.rss {
				rs := newRS(d, r.name, r.name, r.size, minute, sizeAnnotations(tc.from, tc.maxReplicas, 0))
				if r.name == tc.newRS {
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
			for _, r := range tc.rss {
				if got[r.name] != r.want {
					t.Errorf("%s = %d, want %d (all: %v)", r.name, got[r.name], r.want, got)
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
