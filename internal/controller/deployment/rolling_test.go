package deployment

import (
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRollingScaleDownPlansRU11(t *testing.T) {
	d := newDeployment(10, intstr.FromInt32(3), intstr.FromInt32(2))
	a := withStatus(newRS(d, "a", "1", 5, 0, nil), 5, 2)
	b := withStatus(newRS(d, "b", "2", 4, 1, nil), 4, 4)
	nrs := withStatus(newRS(d, "n", "3", 4, 2, nil), 4, 4)
	all := []*appsv1.ReplicaSet{a, b, nrs}
	if got := maxScaledDown(fencepostsFor(d), all, nrs); got != 13-8-0 {
		t.Errorf("maxScaledDown = %d", got)
	}
	plan := removals(unhealthyScaleDowns([]*appsv1.ReplicaSet{b, a}, 2))
	if plan[a] != 2 || len(plan) != 1 {
		t.Errorf("step A plan = %v", plan)
	}
	a.Status.AvailableReplicas = 7 // status lagging above spec: nothing unhealthy, no error
	if plan := unhealthyScaleDowns([]*appsv1.ReplicaSet{a}, 5); len(plan) != 0 {
		t.Errorf("avail > spec plan = %v", plan)
	}
	a.Status.AvailableReplicas = 5
	// available 13, minAvailable 8: budget 5, oldest first: a -5.
	plan = removals(healthyScaleDowns(fencepostsFor(d), []*appsv1.ReplicaSet{b, a}, all, math.MaxInt32))
	if plan[a] != 5 || plan[b] != 0 {
		t.Errorf("step B plan = %v", plan)
	}
}

// TestScaleDownIgnoresAvailabilityAboveSize reproduces the state seen on the
// embedded control plane: a ReplicaSet just scaled to 10 whose cached status
// still shows 15 available must count as 10, or step B (RU-11) removes 8
// replicas and availability drops to 10 of the 15 required.
func TestScaleDownIgnoresAvailabilityAboveSize(t *testing.T) {
	d := newDeployment(20, intstr.FromString("25%"), intstr.FromString("25%"))
	old := withStatus(newRS(d, "old", "1", 10, 0, nil), 15, 15)
	nrs := withStatus(newRS(d, "new", "2", 15, 1, nil), 15, 8)
	plan := removals(healthyScaleDowns(fencepostsFor(d), []*appsv1.ReplicaSet{old}, []*appsv1.ReplicaSet{old, nrs}, math.MaxInt32))
	// available within size = 10 + 8 = 18; minAvailable 15 → remove 3.
	if plan[old] != 3 {
		t.Errorf("step B removes %d from the old ReplicaSet, want 3", plan[old])
	}
	if got := (specReplicas(old) - plan[old]) + nrs.Status.AvailableReplicas; got < fencepostsFor(d).MinAvailable() {
		t.Errorf("availability after the scale-down %d < minAvailable %d", got, fencepostsFor(d).MinAvailable())
	}
}

// TestSyncOldScaleDownErrorIM1: a failed old-ReplicaSet scale-down in a
// rolling update is returned (IM-1), not swallowed as upstream does (NA-2).
func TestSyncOldScaleDownErrorIM1(t *testing.T) {
	s, u := pct25()
	d := newDeployment(4, s, u)
	old := withStatus(newRS(d, "old", "nginx:old", 4, 0, sizeAnnotations(4, 5, 1)), 4, 4)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 1, 1, sizeAnnotations(4, 5, 2)), 1, 1)
	f := newFixture(t, d, old, cur)
	f.Fail("patch", "replicasets", errQuota)
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("sync error = %v, want the scale-down failure", err)
	}
	if got := *f.rs("old").Spec.Replicas; got != 4 {
		t.Errorf("old ReplicaSet at %d, want unchanged 4", got)
	}
}
