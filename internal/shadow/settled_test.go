package shadow

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// The shadow check re-sums a ReplicaSet's status from its pods with the ReplicaSet controller's own availability
// rule: on the shared vectors (controllertest.AvailabilityCases, which the ReplicaSet controller's
// TestAvailabilityVectors runs too) a status counting the pod available exactly when the rule says is settled,
// and the other count is not.
func TestSettledCountsAvailabilityAsTheController(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	count := map[bool]int32{true: 1, false: 0}
	for _, tc := range controllertest.AvailabilityCases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := tc.Pod("a", now)
			for _, available := range []bool{tc.Available, !tc.Available} {
				one := int32(1)
				rs := &appsv1.ReplicaSet{
					Spec: appsv1.ReplicaSetSpec{Replicas: &one, MinReadySeconds: int32(tc.MinReady / time.Second)},
					Status: appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: count[tc.Ready],
						AvailableReplicas: count[available]},
				}
				why := replicaSetSettled(rs, []*v1.Pod{pod}, now)
				if settled := why == ""; settled != (available == tc.Available) {
					t.Errorf("status with availableReplicas %d: settled %v (%s), want %v", count[available], settled, why, available == tc.Available)
				}
			}
		})
	}
}
