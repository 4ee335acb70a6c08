package deployment

import (
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// heldStatus returns the status of d held at limit: the new ReplicaSet
// newRS at limit, old pods making up the rest, all available.
func heldStatus(d *appsv1.Deployment, limit int32) appsv1.DeploymentStatus {
	n := desiredReplicas(d)
	return appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: limit, AvailableReplicas: n, ReadyReplicas: n}
}

// EX-1 condition: held → Progressing=True rolloutstate.RolloutPartitioned with the
// counts, its transition time kept, no deadline requeue; released (the
// annotation removed) → ReplicaSetUpdated now, the deadline starting
// afresh; a held Deployment whose stored condition is old is not timed out.
func TestPartitionCondition(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(20, surge, unavailable)
	d.Spec.ProgressDeadlineSeconds = new(int32(10))
	d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: "5"}
	cur := withStatus(newRS(d, "nginx-b", "nginx:2", 5, 1, nil), 5, 5)
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 15, 0, nil), 15, 15)
	long := baseTime
	now := baseTime.Add(time.Hour) // far past any deadline
	d.Status = heldStatus(d, 5)
	d.Status.Conditions = []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, "progressing", long)}
	f := fencepostsFor(d)
	p := partitionFor(t, d)

	status := rolloutStatus(d, f, p, []*appsv1.ReplicaSet{old, cur}, cur, now)
	c := rolloutstate.Condition(&status, appsv1.DeploymentProgressing)
	want := `ReplicaSet "nginx-b" has 5 of 20 pods updated, held by kubedeploy.io/rollout-partition.`
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != rolloutstate.RolloutPartitioned || c.Message != want {
		t.Fatalf("held: Progressing %+v, want True %s %q", c, rolloutstate.RolloutPartitioned, want)
	}
	if !c.LastTransitionTime.Time.Equal(long) {
		t.Errorf("held: lastTransitionTime %v, want the True condition's %v", c.LastTransitionTime, long)
	}
	d.Status = status
	if after := stuckRequeueAfter(d, &status, now.Add(time.Hour)); after != 0 {
		t.Errorf("held: deadline requeue after %v, want none", after)
	}
	if again := rolloutStatus(d, f, p, []*appsv1.ReplicaSet{old, cur}, cur, now.Add(time.Hour)); rolloutstate.Condition(&again, appsv1.DeploymentProgressing).Reason != rolloutstate.RolloutPartitioned {
		t.Errorf("held an hour later: %+v", rolloutstate.Condition(&again, appsv1.DeploymentProgressing))
	}

	released := d.DeepCopy()
	delete(released.Annotations, rolloutstate.RolloutPartitionAnnotation)
	later := now.Add(2 * time.Hour)
	status = rolloutStatus(released, f, partitionFor(t, released), []*appsv1.ReplicaSet{old, cur}, cur, later)
	c = rolloutstate.Condition(&status, appsv1.DeploymentProgressing)
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
		d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: tc.v}
		newOne := newRS(d, "nginx-b", "nginx:2", 5, 1, nil)
		oldOne := newRS(d, "nginx-a", "nginx:1", 15, 0, nil)
		total := tc.replicas
		got := partitionFor(t, d).limitScaling(newOne, plan{{rs: oldOne, size: total - tc.proposedNew}, {rs: newOne, size: tc.proposedNew}})
		if got[1].size != tc.wantNew || got[0].size != tc.wantOld {
			t.Errorf("%s at %d replicas, proposed new %d: new %d old %d, want %d and %d",
				tc.v, tc.replicas, tc.proposedNew, got[1].size, got[0].size, tc.wantNew, tc.wantOld)
		}
	}
}

// partitionFor returns d's partition, failing t on an invalid one.
func partitionFor(t *testing.T, d *appsv1.Deployment) rolloutPartition {
	t.Helper()
	p := partitionOf(d)
	if p.invalid != nil {
		t.Fatalf("partitionOf: %v", p.invalid)
	}
	return p
}

// EX-1 limit: the partition bounds the new ReplicaSet while another
// ReplicaSet has replicas, never below the new one's size nor above
// spec.replicas; without the annotation, on a Recreate Deployment, or on a
// first rollout there is none (math.MaxInt32).
func TestNewReplicaSetLimit(t *testing.T) {
	surge, unavailable := pct25()
	for _, tc := range []struct {
		name      string
		value     string // "": no annotation
		recreate  bool
		newSize   int32
		oldSize   int32
		wantLimit int32
	}{
		{name: "no partition", oldSize: 10, wantLimit: math.MaxInt32},
		{name: "partition", value: "3", oldSize: 10, wantLimit: 3},
		{name: "percent", value: "50%", oldSize: 10, wantLimit: 5},
		{name: "new already above", value: "3", newSize: 6, oldSize: 4, wantLimit: 6},
		{name: "first rollout", value: "3", wantLimit: math.MaxInt32},
		{name: "above replicas", value: "30", oldSize: 10, wantLimit: 10},
		{name: "recreate ignores it", value: "3", recreate: true, oldSize: 10, wantLimit: math.MaxInt32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(10, surge, unavailable)
			if tc.recreate {
				d = newRecreateDeployment(10)
			}
			if tc.value != "" {
				d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: tc.value}
			}
			newOne := newRS(d, "nginx-b", "nginx:2", tc.newSize, 1, nil)
			oldOne := newRS(d, "nginx-a", "nginx:1", tc.oldSize, 0, nil)
			if got := partitionFor(t, d).newReplicaSetLimit(newOne, []*appsv1.ReplicaSet{oldOne, newOne}); got != tc.wantLimit {
				t.Errorf("limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}

// EX-1, invalid value: each sync reads the annotation once and says so in
// exactly one Warning event, however many sizing decisions use the limit;
// the rollout holds where it is (the new ReplicaSet is created at 0 and the
// old one keeps its replicas), as a partition of 0 would.
func TestInvalidPartitionWarnsOncePerSync(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(10, surge, unavailable)
	d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: "half"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 10, 0, nil), 10, 10)
	f := newFixture(t, d, old)
	for sync := 1; sync <= 2; sync++ {
		if _, err := f.sync(); err != nil {
			t.Fatalf("sync %d: %v", sync, err)
		}
		f.observe()
		var warnings []string
		for _, e := range f.Events() {
			if strings.Contains(e, InvalidRolloutPartition) {
				warnings = append(warnings, e)
			}
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], `"half"`) {
			t.Errorf("sync %d: InvalidRolloutPartition events %q, want one naming the value", sync, warnings)
		}
	}
	for _, rs := range f.replicaSets() {
		want := int32(0)
		if rs.Name == "nginx-a" {
			want = 10
		}
		if *rs.Spec.Replicas != want {
			t.Errorf("%s has %d replicas, want %d (held where it was)", rs.Name, *rs.Spec.Replicas, want)
		}
	}
	if n := len(f.replicaSets()); n != 2 {
		t.Errorf("%d ReplicaSets, want the old one and a new one at 0", n)
	}
}
