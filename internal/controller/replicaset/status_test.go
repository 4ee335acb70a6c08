package replicaset

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

func statusRS(replicas int32, minReady int32, conds ...appsv1.ReplicaSetCondition) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns", Generation: 3},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        ptr.To(replicas),
			MinReadySeconds: minReady,
			Template:        v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "tier": "web"}}},
		},
		Status: appsv1.ReplicaSetStatus{Conditions: conds},
	}
}

// TestCalculateStatus covers RS-15..RS-17.
func TestCalculateStatus(t *testing.T) {
	cases := calculateStatusCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := calculateStatus(tc.rs, tc.pods, tc.terminating, tc.manageErr, testNow)
			if got.Replicas != tc.wantReplicas || got.FullyLabeledReplicas != tc.wantFully || got.ReadyReplicas != tc.wantReady || got.AvailableReplicas != tc.wantAvail {
				t.Errorf("counts = %d/%d/%d/%d, want %d/%d/%d/%d", got.Replicas, got.FullyLabeledReplicas, got.ReadyReplicas, got.AvailableReplicas,
					tc.wantReplicas, tc.wantFully, tc.wantReady, tc.wantAvail)
			}
			if got.ObservedGeneration != 3 {
				t.Errorf("RS-16 observedGeneration = %d, want 3", got.ObservedGeneration)
			}
			if (got.TerminatingReplicas == nil) != (tc.terminating == nil) || (tc.terminating != nil && *got.TerminatingReplicas != *tc.terminating) {
				t.Errorf("RS-5 terminatingReplicas = %v, want %v", got.TerminatingReplicas, tc.terminating)
			}
			switch {
			case tc.wantCond == nil && len(got.Conditions) != 0:
				t.Errorf("conditions = %+v, want none", got.Conditions)
			case tc.wantCond != nil && (len(got.Conditions) != 1 || got.Conditions[0] != *tc.wantCond):
				t.Errorf("conditions = %+v, want [%+v]", got.Conditions, *tc.wantCond)
			}
		})
	}
}

// TestStatusUnchanged covers RS-18's skip rule.
func TestStatusUnchanged(t *testing.T) {
	rs := statusRS(1, 0)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: 1, ObservedGeneration: 3, TerminatingReplicas: ptr.To[int32](0)}
	same := *rs.Status.DeepCopy()
	if !statusUnchanged(rs, same) {
		t.Error("identical status must be skipped")
	}
	changedTerm := *rs.Status.DeepCopy()
	changedTerm.TerminatingReplicas = nil
	newGen := rs.DeepCopy()
	newGen.Generation = 4
	for name, ok := range map[string]bool{
		"terminating pointer differs": statusUnchanged(rs, changedTerm),
		"generation not observed":     statusUnchanged(newGen, same),
	} {
		if ok {
			t.Errorf("%s: status write must not be skipped", name)
		}
	}
}

// TestNextAvailableCheck covers RS-7's minReadySeconds wake-up.
func TestNextAvailableCheck(t *testing.T) {
	cases := []struct {
		name   string
		rs     *appsv1.ReplicaSet
		pods   []*v1.Pod
		want   time.Duration
		wantOK bool
	}{
		{name: "no minReadySeconds", rs: statusRS(1, 0), pods: []*v1.Pod{newPod("a", readySince(testNow))}},
		{name: "all available", rs: statusRS(1, 10), pods: []*v1.Pod{newPod("a", readySince(testNow.Add(-time.Minute)))}},
		{
			name: "earliest pod to become available", rs: statusRS(2, 10),
			pods: []*v1.Pod{newPod("a", readySince(testNow.Add(-3*time.Second))), newPod("b", readySince(testNow.Add(-8*time.Second)))},
			want: 2 * time.Second, wantOK: true,
		},
		{name: "zero ready time falls back to minReadySeconds", rs: statusRS(1, 10), pods: []*v1.Pod{newPod("a", readySince(time.Time{}))}, want: 10 * time.Second, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := calculateStatus(tc.rs, tc.pods, nil, nil, testNow)
			got, ok := nextAvailableCheck(tc.rs, tc.pods, status, testNow)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("nextAvailableCheck = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// RS-15 on the shared vectors (controllertest.AvailabilityCases): the status counts a pod available exactly when
// the rule says; observe mode's shadow check runs the same vectors (TestSettledCountsAvailabilityAsTheController).
func TestAvailabilityVectors(t *testing.T) {
	for _, tc := range controllertest.AvailabilityCases {
		t.Run(tc.Name, func(t *testing.T) {
			rs := statusRS(1, int32(tc.MinReady/time.Second))
			got := calculateStatus(rs, []*v1.Pod{tc.Pod("a", testNow)}, nil, nil, testNow).AvailableReplicas
			if want := map[bool]int32{true: 1, false: 0}[tc.Available]; got != want {
				t.Errorf("availableReplicas %d, want %d", got, want)
			}
		})
	}
}

type calculateStatusCase struct {
	name                                          string
	rs                                            *appsv1.ReplicaSet
	pods                                          []*v1.Pod
	terminating                                   *int32
	manageErr                                     error
	wantReplicas, wantFully, wantReady, wantAvail int32
	wantCond                                      *appsv1.ReplicaSetCondition
}

// calculateStatusCases is TestCalculateStatus's table.
func calculateStatusCases() []calculateStatusCase {
	full := withLabels(map[string]string{"app": "x", "tier": "web", "extra": "y"})
	partial := withLabels(map[string]string{"app": "x"})
	existing := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: ReasonFailedCreate, Message: "old"}
	boom := errors.New("quota exceeded")
	return []calculateStatusCase{
		{
			name: "RS-15 counts without minReadySeconds", rs: statusRS(3, 0),
			pods:         []*v1.Pod{newPod("a", full, readySince(testNow)), newPod("b", partial, readySince(testNow)), newPod("c", full)},
			terminating:  ptr.To[int32](2),
			wantReplicas: 3, wantFully: 2, wantReady: 2, wantAvail: 2,
		},
		{
			name: "RS-15 minReadySeconds availability", rs: statusRS(3, 10),
			pods: []*v1.Pod{
				newPod("a", full, readySince(testNow.Add(-10*time.Second))), // exactly available
				newPod("b", full, readySince(testNow.Add(-9*time.Second))),  // not yet
				newPod("c", full, readySince(time.Time{})),                  // zero time is never available
			},
			wantReplicas: 3, wantFully: 3, wantReady: 3, wantAvail: 1,
		},
		{
			name: "RS-17 add ReplicaFailure FailedCreate when too few", rs: statusRS(3, 0),
			pods: []*v1.Pod{newPod("a", full)}, manageErr: boom,
			wantReplicas: 1, wantFully: 1,
			wantCond: &appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: ReasonFailedCreate, Message: "quota exceeded", LastTransitionTime: metav1.NewTime(testNow)},
		},
		{
			name: "RS-17 add ReplicaFailure FailedDelete when too many", rs: statusRS(0, 0),
			pods: []*v1.Pod{newPod("a", full)}, manageErr: boom,
			wantReplicas: 1, wantFully: 1,
			wantCond: &appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: ReasonFailedDelete, Message: "quota exceeded", LastTransitionTime: metav1.NewTime(testNow)},
		},
		{
			name: "RS-17 empty reason when the diff is zero", rs: statusRS(1, 0),
			pods: []*v1.Pod{newPod("a", full)}, manageErr: boom,
			wantReplicas: 1, wantFully: 1,
			wantCond: &appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Message: "quota exceeded", LastTransitionTime: metav1.NewTime(testNow)},
		},
		{
			name: "RS-17 existing condition kept as-is", rs: statusRS(3, 0, existing),
			manageErr: boom, wantCond: &existing,
		},
		{name: "RS-17 condition removed on success", rs: statusRS(0, 0, existing)},
	}
}
