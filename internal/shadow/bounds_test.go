package shadow

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// resized returns a copy of rs at size (spec.replicas).
func resized(rs *appsv1.ReplicaSet, size int32) *appsv1.ReplicaSet {
	rs = rs.DeepCopy()
	rs.Spec.Replicas = ptr.To(size)
	return rs
}

// A rolling update of 4 (maxSurge 1, maxUnavailable 1) from web-1 to web-2, checked write by write.
func TestCheckBounds(t *testing.T) {
	w := completeWorld(4, "nginx:1.0")
	w.d.Spec.Template = template("nginx:1.1")
	newRS := w.addReplicaSet("web-2", "nginx:1.1", 2, 0, 0)
	oldRS := w.rss[0]
	state := func(oldSize, newSize, newAvailable int32) []*appsv1.ReplicaSet {
		n := resized(newRS, newSize)
		n.Status.AvailableReplicas = newAvailable
		return []*appsv1.ReplicaSet{resized(oldRS, oldSize), n}
	}
	cases := []struct {
		name          string
		before, after *appsv1.ReplicaSet
		rss           []*appsv1.ReplicaSet
		partition     string
		want          []Bound
	}{
		{"new 0→1 within surge", resized(newRS, 0), resized(newRS, 1), state(4, 1, 0), "", nil},
		{"new 0→2 past surge", resized(newRS, 0), resized(newRS, 2), state(4, 2, 0), "", []Bound{BoundSurge}},
		{"old 4→3 keeps 3 of minAvailable 3", resized(oldRS, 4), resized(oldRS, 3), state(3, 1, 0), "", nil},
		{"old 4→2 with the new one unavailable", resized(oldRS, 4), resized(oldRS, 2), state(2, 1, 0), "", []Bound{BoundAvailability}},
		{"old 3→2 once the new one is available", resized(oldRS, 3), resized(oldRS, 2), state(2, 2, 1), "", nil},
		{"new 2→3 past partition 2", resized(newRS, 2), resized(newRS, 3), state(1, 3, 2), "2", []Bound{BoundPartition}},
		{"new 1→2 up to partition 2", resized(newRS, 1), resized(newRS, 2), state(2, 2, 1), "2", nil},
		{"new 3→4 with no old replicas left", resized(newRS, 3), resized(newRS, 4), state(0, 4, 3), "2", nil},
	}
	for _, c := range cases {
		d := w.d.DeepCopy()
		if c.partition != "" {
			d.Annotations["kubedeploy.io/rollout-partition"] = c.partition
		}
		var got []Bound
		for _, v := range CheckBounds(d, c.before, c.after, c.rss) {
			got = append(got, v.Bound)
		}
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: violations %v, want %v", c.name, got, c.want)
		}
	}
	// Not checked: a scaling (desired-replicas differs from spec.replicas), a paused Deployment.
	scaled := w.d.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](2)
	if v := CheckBounds(scaled, resized(oldRS, 4), resized(oldRS, 1), state(1, 0, 0)); v != nil {
		t.Errorf("a scaling: %v, want unchecked", v)
	}
	paused := w.d.DeepCopy()
	paused.Spec.Paused = true
	if v := CheckBounds(paused, resized(newRS, 0), resized(newRS, 4), state(4, 4, 0)); v != nil {
		t.Errorf("paused: %v, want unchecked", v)
	}
}
