package deployment

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
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
		setCondition(&s, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.NewReplicaSetAvailable, "new", t1))
		c := s.Conditions[1]
		if len(s.Conditions) != 2 || c.Type != appsv1.DeploymentProgressing || !c.LastTransitionTime.Time.Equal(t0) || !c.LastUpdateTime.Time.Equal(t1) {
			t.Errorf("got %+v", s.Conditions)
		}
	})
	t.Run("different status: new timestamps", func(t *testing.T) {
		s := start()
		setCondition(&s, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, rolloutstate.ProgressDeadlineExceeded, "x", t1))
		if c := rolloutstate.Condition(&s, appsv1.DeploymentProgressing); !c.LastTransitionTime.Time.Equal(t1) {
			t.Errorf("got %+v", c)
		}
	})
}

// TestReplicaFailureConditionST14: the Deployment mirrors the new
// ReplicaSet's ReplicaFailure condition first, else the first one found in
// allRSs, with lastUpdateTime = lastTransitionTime = the ReplicaSet's
// transition time; none when no ReplicaSet has one.
func TestReplicaFailureConditionST14(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	failing := func(name, reason string, minute int) *appsv1.ReplicaSet {
		rs := newRS(d, name, "x", 3, minute, nil)
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{
			{Type: "Other", Status: v1.ConditionTrue},
			{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: reason, Message: reason + " message",
				LastTransitionTime: metav1.NewTime(baseTime.Add(time.Duration(minute) * time.Minute))},
		}
		return rs
	}
	healthy := newRS(d, "healthy", "x", 3, 0, nil)
	oldFailing, newFailing := failing("old", "FailedCreate", 1), failing("new", "QuotaExceeded", 2)

	if _, ok := replicaFailureCondition([]*appsv1.ReplicaSet{healthy, nil}, healthy); ok {
		t.Error("a condition was returned although no ReplicaSet has one")
	}
	c, ok := replicaFailureCondition([]*appsv1.ReplicaSet{oldFailing, newFailing}, newFailing)
	want := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: v1.ConditionTrue, Reason: "QuotaExceeded",
		Message: "QuotaExceeded message", LastUpdateTime: metav1.NewTime(baseTime.Add(2 * time.Minute)),
		LastTransitionTime: metav1.NewTime(baseTime.Add(2 * time.Minute))}
	if !ok || !reflect.DeepEqual(c, want) {
		t.Errorf("with the new ReplicaSet failing: got %+v, %v; want %+v", c, ok, want)
	}
	c, ok = replicaFailureCondition([]*appsv1.ReplicaSet{nil, healthy, oldFailing}, healthy)
	if !ok || c.Reason != "FailedCreate" || c.Type != appsv1.DeploymentReplicaFailure {
		t.Errorf("with only an old ReplicaSet failing: got %+v, %v; want its FailedCreate", c, ok)
	}
	if c, ok := replicaFailureCondition([]*appsv1.ReplicaSet{oldFailing}, nil); !ok || c.Reason != "FailedCreate" {
		t.Errorf("with no new ReplicaSet: got %+v, %v; want the old one's FailedCreate", c, ok)
	}
}
