package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// TestSyncCreateErrorRV12 and IM-1: failed writes are returned.
func TestSyncCreateErrorRV12(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	f.Fail("create", "replicasets", errQuota)
	if _, err := f.sync(); err == nil {
		t.Fatal("expected the create error")
	}
	p := rolloutstate.Condition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Reason != ReplicaSetCreateError || p.Status != v1.ConditionFalse {
		t.Errorf("Progressing = %+v", p)
	}
	if ev := f.Events(); len(ev) != 1 || ev[0][:35] != "Warning ReplicaSetCreateError Faile" {
		t.Errorf("events = %q", ev)
	}
}

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
	f.ExpectWrites(map[string]int{"create replicasets": 1, "update deployments/status": 1})
	if cc := f.deployment().Status.CollisionCount; cc == nil || *cc != 1 {
		t.Fatalf("collisionCount = %v, want 1", cc)
	}
	f.observe()
	if _, err := f.sync(); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	want := "nginx-" + computeHash(&d.Spec.Template, ptr.To[int32](1))
	if _, err := f.Client.AppsV1().ReplicaSets("ns").Get(f.Ctx, want, metav1.GetOptions{}); err != nil {
		t.Errorf("ReplicaSet %s under the new hash: %v", want, err)
	}
}
