package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

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
	if rolloutstate.Condition(&s, "Custom") == nil {
		t.Error("ST-4/ST-20: custom condition dropped")
	}
	if a := rolloutstate.Condition(&s, appsv1.DeploymentAvailable); a.Reason != MinimumReplicasAvailable || a.Message != minimumAvailableMessage {
		t.Errorf("Available = %+v (8 >= 10-2)", a)
	}
	nrs.Status.AvailableReplicas = 1
	s = calculateStatus(d, fencepostsFor(d), []*appsv1.ReplicaSet{old, nrs}, nrs, baseTime)
	if a := rolloutstate.Condition(&s, appsv1.DeploymentAvailable); a.Status != v1.ConditionFalse || a.Reason != MinimumReplicasUnavailable {
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
	// ST-9 (complete) is rolloutstate.Complete, tested there.
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
	now := baseTime.Add(601 * time.Second)
	for _, tc := range []struct {
		name string
		s    appsv1.DeploymentStatus
		want bool
	}{
		{"no condition", appsv1.DeploymentStatus{}, false},
		{"available never times out", withProgressing(rolloutstate.NewReplicaSetAvailable, baseTime), false},
		{"exceeded stays", withProgressing(rolloutstate.ProgressDeadlineExceeded, now), true},
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
		if deploymentTimedOut(d2, &s, now) || rolloutstate.HasProgressDeadline(d2) {
			t.Error("timed out without deadline")
		}
	})
	t.Run("ST-16 requeue after remaining time + 1s", func(t *testing.T) { checkStuckRequeueAfterST16(t, d) })
	t.Run("ST-13 timed out then progress", func(t *testing.T) { checkTimedOutThenProgressST13(t, d, now) })
}

// withProgressing is a status holding only a true Progressing condition with
// the given reason, last updated and transitioned at at.
func withProgressing(reason string, at time.Time) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
		newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reason, "", at)}}
}

// checkStuckRequeueAfterST16 (ST-16): requeue after the remaining time + 1s;
// none once the deadline is exceeded.
func checkStuckRequeueAfterST16(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	d2 := d.DeepCopy()
	d2.Status = withProgressing(ReplicaSetUpdated, baseTime)
	s := d2.Status
	if got := stuckRequeueAfter(d2, &s, baseTime.Add(100*time.Second)); got != 501*time.Second {
		t.Errorf("got %v", got)
	}
	d2.Status = withProgressing(rolloutstate.ProgressDeadlineExceeded, baseTime)
	if got := stuckRequeueAfter(d2, &s, baseTime); got != 0 {
		t.Errorf("exceeded: got %v", got)
	}
}

// checkTimedOutThenProgressST13 (ST-13): a timed-out rollout reports
// ProgressDeadlineExceeded, and progress afterwards sets ReplicaSetUpdated at now.
func checkTimedOutThenProgressST13(t *testing.T, d *appsv1.Deployment, now time.Time) {
	t.Helper()
	d2 := d.DeepCopy()
	d2.Status = withProgressing(ReplicaSetUpdated, baseTime)
	rs := withStatus(newRS(d2, "b", "nginx:1.14.2", 3, 0, nil), 1, 1)
	d2.Status.Replicas, d2.Status.UpdatedReplicas, d2.Status.ReadyReplicas, d2.Status.AvailableReplicas = 1, 1, 1, 1
	s := rolloutStatus(d2, fencepostsFor(d2), partitionFor(t, d2), []*appsv1.ReplicaSet{rs}, rs, now)
	c := rolloutstate.Condition(&s, appsv1.DeploymentProgressing)
	if c.Reason != rolloutstate.ProgressDeadlineExceeded || c.Status != v1.ConditionFalse || c.Message != `ReplicaSet "b" has timed out progressing.` {
		t.Errorf("got %+v", c)
	}
	rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 2, 2
	s = rolloutStatus(d2, fencepostsFor(d2), partitionFor(t, d2), []*appsv1.ReplicaSet{rs}, rs, now)
	if c := rolloutstate.Condition(&s, appsv1.DeploymentProgressing); c.Reason != ReplicaSetUpdated || !c.LastUpdateTime.Time.Equal(now) {
		t.Errorf("got %+v", c)
	}
}
