package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

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

// TestSyncCleanupDeletesOldReplicaSets (RU-12, CL-1..CL-6): a complete
// Deployment with revisionHistoryLimit 0 deletes its one eligible old
// ReplicaSet and keeps an old one whose status is not yet observed.
func TestSyncCleanupDeletesOldReplicaSets(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3"}
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 2, 2, sizeAnnotations(2, 3, 3)), 2, 2)
	gone := withStatus(newRS(d, "gone", "nginx:a", 0, 0, sizeAnnotations(2, 3, 1)), 0, 0)
	unsynced := withStatus(newRS(d, "unsynced", "nginx:b", 0, 1, sizeAnnotations(2, 3, 2)), 0, 0)
	unsynced.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	f := newFixture(t, d, cur, gone, unsynced)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	writes := f.Writes()
	if writes["delete replicasets"] != 1 {
		t.Fatalf("writes = %v, want exactly one ReplicaSet delete", writes)
	}
	names := map[string]bool{}
	for _, rs := range f.replicaSets() {
		names[rs.Name] = true
	}
	if names["gone"] || !names["unsynced"] || !names["cur"] {
		t.Errorf("ReplicaSets left %v, want cur and unsynced", names)
	}
}
