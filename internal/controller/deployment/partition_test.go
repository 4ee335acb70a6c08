package deployment

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// EX-1: "N" is N pods, "N%" is N percent of spec.replicas rounded down,
// both capped at spec.replicas; anything else is an error.
func TestParsePartition(t *testing.T) {
	for _, tc := range []struct {
		v        string
		replicas int32
		want     int32
		wantErr  bool
	}{
		{v: "5", replicas: 20, want: 5},
		{v: "0", replicas: 20, want: 0},
		{v: "20", replicas: 20, want: 20},
		{v: "25", replicas: 20, want: 20},
		{v: "007", replicas: 20, want: 7},
		{v: "50%", replicas: 20, want: 10},
		{v: "50%", replicas: 40, want: 20},
		{v: "33%", replicas: 10, want: 3}, // 3.3 rounded down
		{v: "99%", replicas: 10, want: 9},
		{v: "0%", replicas: 10, want: 0},
		{v: "100%", replicas: 10, want: 10},
		{v: "250%", replicas: 10, want: 10},
		{v: "99999999999999999999", replicas: 10, want: 10}, // overflows int64: more than any Deployment
		{v: "99999999999999999999%", replicas: 10, want: 10},
		{v: "5", replicas: 0, want: 0},
		{v: "5", replicas: -3, want: 0},
		{v: "", replicas: 10, wantErr: true},
		{v: "%", replicas: 10, wantErr: true},
		{v: "-1", replicas: 10, wantErr: true},
		{v: "+1", replicas: 10, wantErr: true},
		{v: " 5", replicas: 10, wantErr: true},
		{v: "5 %", replicas: 10, wantErr: true},
		{v: "2.5", replicas: 10, wantErr: true},
		{v: "5%%", replicas: 10, wantErr: true},
		{v: "five", replicas: 10, wantErr: true},
	} {
		got, err := ParsePartition(tc.v, tc.replicas)
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("ParsePartition(%q, %d) = %d, want an error", tc.v, tc.replicas, got)
		case tc.wantErr && !strings.Contains(err.Error(), RolloutPartitionAnnotation):
			t.Errorf("ParsePartition(%q): error %q does not name the annotation", tc.v, err)
		case !tc.wantErr && (err != nil || got != tc.want):
			t.Errorf("ParsePartition(%q, %d) = %d, %v; want %d", tc.v, tc.replicas, got, err, tc.want)
		}
	}
}

// partitionedPlan simulates rolling d (fully rolled out on nginx:1.14.2) to
// nginx:1.9.3 with partition value v.
func partitionedPlan(t *testing.T, d *appsv1.Deployment, v string) *Plan {
	t.Helper()
	return simulateImageChange(t, d, map[string]string{RolloutPartitionAnnotation: v}, SimulationConfig{})
}

// EX-1 on the seed Deployment (20 replicas, 25%/25%): partition 5 creates
// the new ReplicaSet at 5, the old one goes to 15 and stays there; "50%"
// stops at 10 and 10. Never above 25 pods or below 15 available.
func TestSimulatePartitionHolds(t *testing.T) {
	surge, unavailable := pct25()
	for _, tc := range []struct {
		v                string
		wantNew, wantOld []int32
	}{
		{v: "5", wantNew: []int32{5}, wantOld: []int32{15}},
		{v: "50%", wantNew: []int32{5, 10}, wantOld: []int32{15, 10}},
		{v: "0", wantNew: []int32{0}, wantOld: nil},
	} {
		t.Run(tc.v, func(t *testing.T) {
			p := partitionedPlan(t, newDeployment(20, surge, unavailable), tc.v)
			if p.Complete || !p.Partitioned || !strings.Contains(p.Stopped, RolloutPartitionAnnotation) {
				t.Fatalf("plan complete %v, partitioned %v, stopped %q; want held", p.Complete, p.Partitioned, p.Stopped)
			}
			if got := p.NewReplicaSetSizes(); !slices.Equal(got, tc.wantNew) {
				t.Errorf("new ReplicaSet sizes %v, want %v", got, tc.wantNew)
			}
			if tc.wantOld != nil {
				if got := p.OldReplicaSetSizes(0); !slices.Equal(got, tc.wantOld) {
					t.Errorf("old ReplicaSet sizes %v, want %v", got, tc.wantOld)
				}
			}
			if p.PeakPods > 25 || p.MinAvailable < 15 {
				t.Errorf("peak %d, min available %d; bounds 25 and 15", p.PeakPods, p.MinAvailable)
			}
		})
	}
	// A partition at or above replicas is no partition.
	if p := partitionedPlan(t, newDeployment(20, surge, unavailable), "100%"); !p.Complete || p.Partitioned {
		t.Errorf("100%%: complete %v, partitioned %v (%s)", p.Complete, p.Partitioned, p.Stopped)
	}
}

// heldStatus returns the status of d held at limit: the new ReplicaSet
// newRS at limit, old pods making up the rest, all available.
func heldStatus(d *appsv1.Deployment, limit int32) appsv1.DeploymentStatus {
	n := desiredReplicas(d)
	return appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: limit, AvailableReplicas: n, ReadyReplicas: n}
}

// EX-1 condition: held → Progressing=True RolloutPartitioned with the
// counts, its transition time kept, no deadline requeue; released (the
// annotation removed) → ReplicaSetUpdated now, the deadline starting
// afresh; a held Deployment whose stored condition is old is not timed out.
func TestPartitionCondition(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(20, surge, unavailable)
	d.Spec.ProgressDeadlineSeconds = new(int32(10))
	d.Annotations = map[string]string{RolloutPartitionAnnotation: "5"}
	cur := withStatus(newRS(d, "nginx-b", "nginx:2", 5, 1, nil), 5, 5)
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 15, 0, nil), 15, 15)
	long := baseTime
	now := baseTime.Add(time.Hour) // far past any deadline
	d.Status = heldStatus(d, 5)
	d.Status.Conditions = []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, "progressing", long)}
	f := fencepostsFor(d)

	status := rolloutStatus(d, f, []*appsv1.ReplicaSet{old, cur}, cur, now)
	c := getCondition(&status, appsv1.DeploymentProgressing)
	want := `ReplicaSet "nginx-b" has 5 of 20 pods updated, held by kubedeploy.io/rollout-partition.`
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != RolloutPartitioned || c.Message != want {
		t.Fatalf("held: Progressing %+v, want True %s %q", c, RolloutPartitioned, want)
	}
	if !c.LastTransitionTime.Time.Equal(long) {
		t.Errorf("held: lastTransitionTime %v, want the True condition's %v", c.LastTransitionTime, long)
	}
	d.Status = status
	if after := stuckRequeueAfter(d, &status, now.Add(time.Hour)); after != 0 {
		t.Errorf("held: deadline requeue after %v, want none", after)
	}
	if again := rolloutStatus(d, f, []*appsv1.ReplicaSet{old, cur}, cur, now.Add(time.Hour)); getCondition(&again, appsv1.DeploymentProgressing).Reason != RolloutPartitioned {
		t.Errorf("held an hour later: %+v", getCondition(&again, appsv1.DeploymentProgressing))
	}

	released := d.DeepCopy()
	delete(released.Annotations, RolloutPartitionAnnotation)
	later := now.Add(2 * time.Hour)
	status = rolloutStatus(released, f, []*appsv1.ReplicaSet{old, cur}, cur, later)
	c = getCondition(&status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != ReplicaSetUpdated || !c.LastUpdateTime.Time.Equal(later) {
		t.Fatalf("released: Progressing %+v, want ReplicaSetUpdated updated at %v", c, later)
	}
	released.Status = status
	if after := stuckRequeueAfter(released, &status, later); after != 11*time.Second {
		t.Errorf("released: deadline requeue after %v, want the full 10 s + 1 s", after)
	}
}

// EX-1 scaling: the new ReplicaSet stays at its limit; what proportional
// scaling would have given it goes to an old ReplicaSet, so the total is
// unchanged. A percent partition grows with spec.replicas.
func TestPartitionScaling(t *testing.T) {
	surge, unavailable := pct25()
	for _, tc := range []struct {
		v                string
		replicas         int32
		proposedNew      int32
		wantNew, wantOld int32
	}{
		{v: "5", replicas: 40, proposedNew: 10, wantNew: 5, wantOld: 35},
		{v: "50%", replicas: 40, proposedNew: 20, wantNew: 20, wantOld: 20},
		{v: "50%", replicas: 40, proposedNew: 22, wantNew: 20, wantOld: 20},
		{v: "5", replicas: 10, proposedNew: 3, wantNew: 3, wantOld: 7},
	} {
		d := newDeployment(tc.replicas, surge, unavailable)
		d.Annotations = map[string]string{RolloutPartitionAnnotation: tc.v}
		newOne := newRS(d, "nginx-b", "nginx:2", 5, 1, nil)
		oldOne := newRS(d, "nginx-a", "nginx:1", 15, 0, nil)
		total := tc.replicas
		got := partitionScaling(d, newOne, plan{{rs: oldOne, size: total - tc.proposedNew}, {rs: newOne, size: tc.proposedNew}})
		if got[1].size != tc.wantNew || got[0].size != tc.wantOld {
			t.Errorf("%s at %d replicas, proposed new %d: new %d old %d, want %d and %d",
				tc.v, tc.replicas, tc.proposedNew, got[1].size, got[0].size, tc.wantNew, tc.wantOld)
		}
	}
}

// FuzzPartition: for any replicas, maxSurge, maxUnavailable and partition
// (pods or percent), the simulated rollout (this package's own sync, EX-1)
// never puts more pods on the new template than the partition allows, keeps
// within replicas + maxSurge pods and replicas − maxUnavailable available at
// every step, and ends held with the new ReplicaSet at exactly the partition
// (or complete when the partition is at or above replicas).
func FuzzPartition(f *testing.F) {
	f.Add(int32(20), int32(5), int32(5), false, int32(5), false, false)
	f.Add(int32(20), int32(25), int32(25), true, int32(50), true, false)
	f.Add(int32(3), int32(0), int32(1), false, int32(1), false, false)
	f.Add(int32(10), int32(0), int32(0), false, int32(0), false, true)
	f.Add(int32(7), int32(100), int32(0), true, int32(99), true, false)
	f.Fuzz(func(t *testing.T, replicas, surgeV, unavailableV int32, percent bool, partitionV int32, partitionPercent, minReady bool) {
		replicas = bounded(replicas, 40)
		surge := fuzzFencepost(percent, surgeV, replicas)
		unavailable := fuzzFencepost(percent, unavailableV, replicas)
		d := newDeployment(replicas, surge, unavailable)
		if minReady {
			d.Spec.MinReadySeconds = 2
		}
		value := fmt.Sprint(bounded(partitionV, replicas+5))
		if partitionPercent {
			value = fmt.Sprintf("%d%%", bounded(partitionV, 120))
		}
		limit, err := ParsePartition(value, replicas)
		if err != nil {
			t.Fatal(err)
		}
		p := partitionedPlan(t, d, value)
		maxSurge, maxUnavailable := resolvedOracle(&surge, &unavailable, replicas)
		if replicas > 0 && maxUnavailable > replicas {
			maxUnavailable = replicas
		}
		for i, s := range p.Steps {
			if s.NewReplicas > limit {
				t.Fatalf("step %d: new ReplicaSet at %d, partition %q allows %d (%+v)", i, s.NewReplicas, value, limit, p.Steps)
			}
			if s.MaxTotal > replicas+maxSurge {
				t.Fatalf("step %d: %d pods, bound %d (%+v)", i, s.MaxTotal, replicas+maxSurge, p.Steps)
			}
			if s.MinAvailable < replicas-maxUnavailable {
				t.Fatalf("step %d: %d available, bound %d (%+v)", i, s.MinAvailable, replicas-maxUnavailable, p.Steps)
			}
		}
		switch {
		case limit >= replicas:
			if !p.Complete {
				t.Fatalf("partition %q of %d replicas: want complete, %s", value, replicas, p.Stopped)
			}
		case !p.Partitioned:
			t.Fatalf("partition %q (%d) of %d replicas: want held, complete %v, %s (%+v)", value, limit, replicas, p.Complete, p.Stopped, p.Steps)
		case len(p.Steps) == 0:
			t.Fatalf("partition %q: held without a step", value)
		default:
			last := p.Steps[len(p.Steps)-1]
			if last.NewReplicas != limit || sum(last.OldReplicas) != replicas-limit {
				t.Fatalf("held at new %d, old %v; want %d and %d", last.NewReplicas, last.OldReplicas, limit, replicas-limit)
			}
		}
	})
}

func sum(v []int32) int32 {
	var n int32
	for _, x := range v {
		n += x
	}
	return n
}
