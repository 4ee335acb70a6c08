package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestSetConditionST7(t *testing.T) {
	t0, t1 := baseTime, baseTime.Add(time.Hour)
	start := func() appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, "old", t0),
			newCondition(appsv1.DeploymentAvailable, v1.ConditionTrue, MinimumReplicasAvailable, "a", t0),
		}}
	}
	t.Run("same status and reason: untouched", func(t *testing.T) {
		s := start()
		setCondition(&s, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, "new", t1))
		if c := s.Conditions[0]; c.Message != "old" || !c.LastUpdateTime.Time.Equal(t0) {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("same status new reason: keeps transition time, moves to end", func(t *testing.T) {
		s := start()
		setCondition(&s, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetAvailable, "new", t1))
		c := s.Conditions[1]
		if len(s.Conditions) != 2 || c.Type != appsv1.DeploymentProgressing || !c.LastTransitionTime.Time.Equal(t0) || !c.LastUpdateTime.Time.Equal(t1) {
			t.Errorf("got %+v", s.Conditions)
		}
	})
	t.Run("different status: new timestamps", func(t *testing.T) {
		s := start()
		setCondition(&s, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, ProgressDeadlineExceeded, "x", t1))
		if c := getCondition(&s, appsv1.DeploymentProgressing); !c.LastTransitionTime.Time.Equal(t1) {
			t.Errorf("got %+v", c)
		}
	})
}

func TestCalculateStatusST1toST4(t *testing.T) {
	d := newDeployment(10, intstr.FromString("25%"), intstr.FromString("25%"))
	d.Generation = 4
	d.Status.CollisionCount = ptr.To[int32](2)
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: "Custom", Status: v1.ConditionTrue}}
	old := withStatus(newRS(d, "a", "x", 6, 0, nil), 6, 6)
	nrs := withStatus(newRS(d, "b", "y", 5, 1, nil), 4, 2)
	nrs.Status.ReadyReplicas = 3
	s := calculateStatus(d, fencepostsFor(d), []*appsv1.ReplicaSet{old, nrs}, nrs, baseTime)
	if s.ObservedGeneration != 4 || s.Replicas != 10 || s.UpdatedReplicas != 4 || s.ReadyReplicas != 9 ||
		s.AvailableReplicas != 8 || s.UnavailableReplicas != 3 || *s.CollisionCount != 2 || *s.TerminatingReplicas != 0 {
		t.Errorf("status = %+v", s)
	}
	if getCondition(&s, "Custom") == nil {
		t.Error("ST-4/ST-20: custom condition dropped")
	}
	if a := getCondition(&s, appsv1.DeploymentAvailable); a.Reason != MinimumReplicasAvailable || a.Message != minimumAvailableMessage {
		t.Errorf("Available = %+v (8 >= 10-2)", a)
	}
	nrs.Status.AvailableReplicas = 1
	s = calculateStatus(d, fencepostsFor(d), []*appsv1.ReplicaSet{old, nrs}, nrs, baseTime)
	if a := getCondition(&s, appsv1.DeploymentAvailable); a.Status != v1.ConditionFalse || a.Reason != MinimumReplicasUnavailable {
		t.Errorf("Available = %+v (7 < 8)", a)
	}
	t.Run("ST-3 nil terminating", func(t *testing.T) {
		unobserved := newRS(d, "c", "z", 0, 2, nil)
		if got := terminatingReplicas([]*appsv1.ReplicaSet{old, unobserved}); got == nil || *got != 0 {
			t.Errorf("unobserved RS must be skipped, got %v", got)
		}
		observedNil := newRS(d, "c", "z", 0, 2, nil)
		observedNil.Status.ObservedGeneration = 1
		if got := terminatingReplicas([]*appsv1.ReplicaSet{old, observedNil}); got != nil {
			t.Errorf("got %d, want nil", *got)
		}
	})
}

func TestProgressPredicatesST9toST16(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Status = appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}
	complete := appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 1}
	if !deploymentComplete(d, &complete) {
		t.Error("ST-9 complete")
	}
	stale := complete
	stale.ObservedGeneration = 0
	if deploymentComplete(d, &stale) {
		t.Error("ST-9 needs observedGeneration >= generation")
	}
	for _, tc := range []struct {
		name string
		s    appsv1.DeploymentStatus
		want bool
	}{
		{"no change", d.Status, false},
		{"more updated", appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}, true},
		{"fewer old", appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}, true},
		{"more ready", appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 2}, true},
		{"more available", appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 3}, true},
	} {
		t.Run("ST-10 "+tc.name, func(t *testing.T) {
			if got := deploymentProgressing(d, &tc.s); got != tc.want {
				t.Errorf("got %v", got)
			}
		})
	}
	withProgressing := func(reason string, at time.Time) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reason, "", at)}}
	}
	now := baseTime.Add(601 * time.Second)
	for _, tc := range []struct {
		name string
		s    appsv1.DeploymentStatus
		want bool
	}{
		{"no condition", appsv1.DeploymentStatus{}, false},
		{"available never times out", withProgressing(NewReplicaSetAvailable, baseTime), false},
		{"exceeded stays", withProgressing(ProgressDeadlineExceeded, now), true},
		{"past deadline", withProgressing(ReplicaSetUpdated, baseTime), true},
		{"exactly at deadline is not before now", withProgressing(ReplicaSetUpdated, baseTime.Add(time.Second)), false},
	} {
		t.Run("ST-11 "+tc.name, func(t *testing.T) {
			if got := deploymentTimedOut(d, &tc.s, now); got != tc.want {
				t.Errorf("got %v", got)
			}
		})
	}
	t.Run("ST-12 MaxInt32 means no deadline", func(t *testing.T) {
		d2 := d.DeepCopy()
		d2.Spec.ProgressDeadlineSeconds = ptr.To[int32](2147483647)
		s := withProgressing(ReplicaSetUpdated, baseTime)
		if deploymentTimedOut(d2, &s, now) || hasProgressDeadline(d2) {
			t.Error("timed out without deadline")
		}
	})
	t.Run("ST-16 requeue after remaining time + 1s", func(t *testing.T) {
		d2 := d.DeepCopy()
		d2.Status = withProgressing(ReplicaSetUpdated, baseTime)
		s := d2.Status
		if got := stuckRequeueAfter(d2, &s, baseTime.Add(100*time.Second)); got != 501*time.Second {
			t.Errorf("got %v", got)
		}
		d2.Status = withProgressing(ProgressDeadlineExceeded, baseTime)
		if got := stuckRequeueAfter(d2, &s, baseTime); got != 0 {
			t.Errorf("exceeded: got %v", got)
		}
	})
	t.Run("ST-13 timed out then progress", func(t *testing.T) {
		d2 := d.DeepCopy()
		d2.Status = withProgressing(ReplicaSetUpdated, baseTime)
		rs := withStatus(newRS(d2, "b", "nginx:1.14.2", 3, 0, nil), 1, 1)
		d2.Status.Replicas, d2.Status.UpdatedReplicas, d2.Status.ReadyReplicas, d2.Status.AvailableReplicas = 1, 1, 1, 1
		s := rolloutStatus(d2, fencepostsFor(d2), []*appsv1.ReplicaSet{rs}, rs, now)
		c := getCondition(&s, appsv1.DeploymentProgressing)
		if c.Reason != ProgressDeadlineExceeded || c.Status != v1.ConditionFalse || c.Message != `ReplicaSet "b" has timed out progressing.` {
			t.Errorf("got %+v", c)
		}
		rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 2, 2
		s = rolloutStatus(d2, fencepostsFor(d2), []*appsv1.ReplicaSet{rs}, rs, now)
		if c := getCondition(&s, appsv1.DeploymentProgressing); c.Reason != ReplicaSetUpdated || !c.LastUpdateTime.Time.Equal(now) {
			t.Errorf("got %+v", c)
		}
	})
}

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

func TestReplicaSetsToDeleteCL(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	mk := func(name string, rev int, size int32, minute int) *appsv1.ReplicaSet {
		rs := newRS(d, name, name, size, minute, sizeAnnotations(3, 4, rev))
		return withStatus(rs, size, size)
	}
	r1, r2, r3 := mk("r1", 1, 0, 5), mk("r2", 2, 1, 0), mk("r3", 3, 0, 1)
	// CL-4 by revision: r1, r2, r3; diff 2 examines r1 (deleted), r2 (not scaled down: skipped, consumes a slot).
	got := replicaSetsToDelete(d, []*appsv1.ReplicaSet{r3, r2, r1})
	if len(got) != 1 || got[0] != r1 {
		t.Errorf("got %v", got)
	}
	d.Spec.RevisionHistoryLimit = nil
	if got := replicaSetsToDelete(d, []*appsv1.ReplicaSet{r3, r2, r1}); got != nil {
		t.Error("CL-2 nil limit disables cleanup")
	}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	r3.Generation = 2
	if got := replicaSetsToDelete(d, []*appsv1.ReplicaSet{r3, r1}); len(got) != 1 || got[0] != r1 {
		t.Errorf("CL-5 stale observedGeneration must be skipped: got %v", got)
	}
}

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
	plan = removals(healthyScaleDowns(fencepostsFor(d), []*appsv1.ReplicaSet{b, a}, all))
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
	plan := removals(healthyScaleDowns(fencepostsFor(d), []*appsv1.ReplicaSet{old}, []*appsv1.ReplicaSet{old, nrs}))
	// available within size = 10 + 8 = 18; minAvailable 15 → remove 3.
	if plan[old] != 3 {
		t.Errorf("step B removes %d from the old ReplicaSet, want 3", plan[old])
	}
	if got := (specReplicas(old) - plan[old]) + nrs.Status.AvailableReplicas; got < fencepostsFor(d).minAvailable() {
		t.Errorf("availability after the scale-down %d < minAvailable %d", got, fencepostsFor(d).minAvailable())
	}
}
