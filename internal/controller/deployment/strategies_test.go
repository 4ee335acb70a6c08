package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestSyncRecreateRC: old scaled to 0 first, new RS only after old pods are gone.
func TestSyncRecreateRC(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d.Spec.Template = podTemplate("nginx:2")
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 3, 0, sizeAnnotations(3, 3, 1)), 3, 3)
	f := newFixture(t, d, old)
	f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); w["create replicasets"] != 0 || w["patch replicasets"] != 1 || *f.rs("nginx-a").Spec.Replicas != 0 {
		t.Fatalf("RC-2: writes %v", w)
	}
	// IM-4: the cache has not seen our write yet, so the sync refuses to act.
	if _, err := f.sync(); err == nil {
		t.Fatal("IM-4: acted on a cache older than our own write")
	}
	f.expectWrites(map[string]int{})
	f.observe()
	// RC-3: old RS still reports replicas: wait.
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); w["create replicasets"] != 0 {
		t.Fatalf("RC-3: created while old pods run: %v", w)
	}
	f.setRSStatus("nginx-a", 0, 0)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); w["create replicasets"] != 1 {
		t.Fatalf("RC-4: writes %v", w)
	}
	if rs := f.rs("nginx-" + computeHash(&d.Spec.Template, nil)); *rs.Spec.Replicas != 3 {
		t.Errorf("RC-4 new RS size %d, want 3", *rs.Spec.Replicas)
	}
}

// TestSyncRecreateScalingIM3: a scaling event with two active RSs is applied
// to the RS that survives (IM-3) and consumes the event.
func TestSyncRecreateScalingIM3(t *testing.T) {
	d := newDeployment(5, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 2, 0, sizeAnnotations(3, 3, 1)), 2, 2)
	nrs := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 3, 2)), 3, 3)
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	f := newFixture(t, d, old, nrs)
	f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.rs("nginx-b"); *got.Spec.Replicas != 5 || got.Annotations[DesiredReplicasAnnotation] != "5" {
		t.Errorf("new RS = %d %v", *got.Spec.Replicas, got.Annotations)
	}
	if got := f.rs("nginx-a"); *got.Spec.Replicas != 2 || got.Annotations[DesiredReplicasAnnotation] != "5" {
		t.Errorf("old RS = %d %v", *got.Spec.Replicas, got.Annotations)
	}
	f.observe()
	rss := []*appsv1.ReplicaSet{f.rs("nginx-a"), f.rs("nginx-b")}
	if isScalingEvent(f.deployment(), rss) {
		t.Error("scaling event not consumed")
	}
}

// TestSyncRollback: RB-3/RB-5/RB-6 via the annotation with target 0.
func TestSyncRollback(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{RevisionAnnotation: "2", RollbackToAnnotation: "0", "note": "dropped"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{RevisionAnnotation: "1", "kubernetes.io/change-cause": "v1"}), 0, 0)
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	f := newFixture(t, d, old, cur)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// RV-2 copies the "note" annotation to the new RS first; then the rollback Update.
	f.expectWrites(map[string]int{"update deployments": 1, "patch replicasets": 1})
	got := f.deployment()
	if got.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("template image = %s", got.Spec.Template.Spec.Containers[0].Image)
	}
	if _, ok := got.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("hash label copied into the deployment template")
	}
	if _, ok := got.Annotations[RollbackToAnnotation]; ok || got.Annotations["note"] != "" || got.Annotations["kubernetes.io/change-cause"] != "v1" || got.Annotations[RevisionAnnotation] != "2" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != `Normal DeploymentRollback Rolled back deployment "nginx" to revision 1` {
		t.Errorf("events = %q", ev)
	}
}

// TestSyncPausedSD6: pausing records DeploymentPaused and creates no RS.
func TestSyncPausedSD6(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Paused = true
	f := newFixture(t, d)
	f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); w["create replicasets"] != 0 || w["update deployments/status"] == 0 {
		t.Errorf("writes %v", w)
	}
	p := getCondition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Reason != DeploymentPaused || p.Status != v1.ConditionUnknown || p.Message != pausedMessage {
		t.Errorf("Progressing = %+v", p)
	}
}

// TestSyncCreateErrorRV12 and IM-1: failed writes are returned.
func TestSyncCreateErrorRV12(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	f.client.PrependReactor("create", "replicasets", func(a coreAction) (bool, runtimeObject, error) {
		return true, nil, errQuota
	})
	if _, err := f.sync(); err == nil {
		t.Fatal("expected the create error")
	}
	p := getCondition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Reason != ReplicaSetCreateError || p.Status != v1.ConditionFalse {
		t.Errorf("Progressing = %+v", p)
	}
	if ev := f.events(); len(ev) != 1 || ev[0][:35] != "Warning ReplicaSetCreateError Faile" {
		t.Errorf("events = %q", ev)
	}
}
