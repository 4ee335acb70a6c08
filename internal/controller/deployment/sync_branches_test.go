package deployment

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSyncHashCollisionRV10: the new ReplicaSet's deterministic name is taken
// by an owned ReplicaSet with another template, so the create returns
// AlreadyExists; the sync bumps collisionCount nil→1 with one status write
// and returns the error; the next sync creates the ReplicaSet under the new
// hash (OM-17).
func TestSyncHashCollisionRV10(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	hash := computeHash(&d.Spec.Template, nil)
	taken := withStatus(newRS(d, "nginx-"+hash, "nginx:other", 2, 0, sizeAnnotations(2, 3, 1)), 2, 2)
	f := newFixture(t, d, taken)
	_, err := f.sync()
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("sync error = %v, want AlreadyExists", err)
	}
	f.expectWrites(map[string]int{"create replicasets": 1, "update deployments/status": 1})
	if cc := f.deployment().Status.CollisionCount; cc == nil || *cc != 1 {
		t.Fatalf("collisionCount = %v, want 1", cc)
	}
	f.observe()
	if _, err := f.sync(); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	want := "nginx-" + computeHash(&d.Spec.Template, ptr.To[int32](1))
	if _, err := f.client.AppsV1().ReplicaSets("ns").Get(f.ctx, want, metav1.GetOptions{}); err != nil {
		t.Errorf("ReplicaSet %s under the new hash: %v", want, err)
	}
}

// TestSyncClaimAdoptsAndReleases (SD-3, AD-1..AD-5): a matching orphan is
// adopted and an owned ReplicaSet whose labels no longer match is released,
// one patch each, before anything else.
func TestSyncClaimAdoptsAndReleases(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 2, 1, sizeAnnotations(2, 3, 2)), 2, 2)
	orphan := withStatus(newRS(d, "orphan", "nginx:old", 0, 0, sizeAnnotations(2, 3, 1)), 0, 0)
	orphan.OwnerReferences = nil
	strayed := withStatus(newRS(d, "strayed", "nginx:older", 0, 0, nil), 0, 0)
	strayed.Labels = map[string]string{"app": "elsewhere"}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	f := newFixture(t, d, cur, orphan, strayed)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	patches := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "replicasets" {
			patches++
			name := a.(coreAction).(interface{ GetName() string }).GetName()
			if name != "orphan" && name != "strayed" {
				t.Errorf("patched %s", name)
			}
		}
	}
	if patches != 2 {
		t.Errorf("%d ReplicaSet patches, want 2 (adopt orphan, release strayed)", patches)
	}
	if ref := metav1.GetControllerOf(f.rs("orphan")); ref == nil || ref.UID != d.UID {
		t.Errorf("orphan not adopted: %v", ref)
	}
}

// TestSyncCleanupDeletesOldReplicaSets (RU-12, CL-1..CL-6): a complete
// Deployment with revisionHistoryLimit 0 deletes its one eligible old
// ReplicaSet and keeps an old one whose status is not yet observed.
func TestSyncCleanupDeletesOldReplicaSets(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	d.Annotations = map[string]string{RevisionAnnotation: "3"}
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 2, 2, sizeAnnotations(2, 3, 3)), 2, 2)
	gone := withStatus(newRS(d, "gone", "nginx:a", 0, 0, sizeAnnotations(2, 3, 1)), 0, 0)
	unsynced := withStatus(newRS(d, "unsynced", "nginx:b", 0, 1, sizeAnnotations(2, 3, 2)), 0, 0)
	unsynced.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	f := newFixture(t, d, cur, gone, unsynced)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	writes := f.writes()
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

// TestSyncOldScaleDownErrorIM1: a failed old-ReplicaSet scale-down in a
// rolling update is returned (IM-1), not swallowed as upstream does (NA-2).
func TestSyncOldScaleDownErrorIM1(t *testing.T) {
	s, u := pct25()
	d := newDeployment(4, s, u)
	old := withStatus(newRS(d, "old", "nginx:old", 4, 0, sizeAnnotations(4, 5, 1)), 4, 4)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 1, 1, sizeAnnotations(4, 5, 2)), 1, 1)
	f := newFixture(t, d, old, cur)
	f.client.PrependReactor("patch", "replicasets", func(a coreAction) (bool, runtimeObject, error) {
		return true, nil, errQuota
	})
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("sync error = %v, want the scale-down failure", err)
	}
	if got := *f.rs("old").Spec.Replicas; got != 4 {
		t.Errorf("old ReplicaSet at %d, want unchanged 4", got)
	}
}

// TestSyncRequeueStuckST16: a full rolling sync that writes nothing returns
// RequeueAfter = lastUpdateTime + progressDeadlineSeconds - now + 1s.
func TestSyncRequeueStuckST16(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	old := withStatus(newRS(d, "old", "nginx:old", 2, 0, sizeAnnotations(2, 3, 1)), 2, 2)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 1, 1, sizeAnnotations(2, 3, 2)), 1, 0)
	f := newFixture(t, d, old, cur)
	// First sync: settle status and conditions.
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.observe()
	p := getCondition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Status != v1.ConditionTrue {
		t.Fatalf("Progressing after first sync = %+v", p)
	}
	f.clock.Step(100 * time.Second)
	res, err := f.sync()
	if err != nil {
		t.Fatalf("second sync: %v", err)
	}
	f.expectWrites(map[string]int{})
	want := p.LastUpdateTime.Add(600*time.Second).Sub(f.clock.Now()) + time.Second
	if res.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, want)
	}
}
