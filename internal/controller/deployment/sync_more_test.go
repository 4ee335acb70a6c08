package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// rollbackFixture is a Deployment of 3 replicas at revision 2 (template
// nginx:1.14.2, ReplicaSet nginx-b) with an older revision-1 ReplicaSet
// nginx-a (nginx:1), asking to roll back to revision `to`.
func rollbackFixture(t *testing.T, to string, withOld bool) *fixture {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{RevisionAnnotation: "2", RollbackToAnnotation: to}
	progressing := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetAvailable, "done", baseTime)
	d.Status.Conditions = []appsv1.DeploymentCondition{progressing}
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	if !withOld {
		cur.Annotations[RevisionAnnotation] = "1"
		d.Annotations[RevisionAnnotation] = "1"
		return newFixture(t, d, cur)
	}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{RevisionAnnotation: "1"}), 0, 0)
	return newFixture(t, d, old, cur)
}

// TestSyncRollbackBranches: the rollback sync (SD-8, section 6) writes the
// Deployment once (annotation cleared), never status (RB-8), and emits the
// event of its branch.
func TestSyncRollbackBranches(t *testing.T) {
	for _, tc := range []struct {
		name      string
		to        string
		withOld   bool
		wantEvent string
		wantImage string
	}{
		{"RB-3 revision 0 with no earlier revision", "0", false,
			"Warning DeploymentRollbackRevisionNotFound Unable to find last revision.", "nginx:1.14.2"},
		{"RB-4 revision not found", "7", true,
			"Warning DeploymentRollbackRevisionNotFound Unable to find the revision to rollback to.", "nginx:1.14.2"},
		{"RB-7 same template", "2", true,
			`Warning DeploymentRollbackTemplateUnchanged The rollback revision contains the same template as current deployment "nginx"`, "nginx:1.14.2"},
		{"RB-3/RB-5 revision 0 is the previous revision", "0", true,
			`Normal DeploymentRollback Rolled back deployment "nginx" to revision 1`, "nginx:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rollbackFixture(t, tc.to, tc.withOld)
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			f.expectWrites(map[string]int{"update deployments": 1})
			got := f.deployment()
			if _, ok := got.Annotations[RollbackToAnnotation]; ok {
				t.Errorf("rollback annotation not cleared: %v", got.Annotations)
			}
			if img := got.Spec.Template.Spec.Containers[0].Image; img != tc.wantImage {
				t.Errorf("template image = %s, want %s", img, tc.wantImage)
			}
			if ev := f.events(); len(ev) != 1 || ev[0] != tc.wantEvent {
				t.Errorf("events = %q, want [%q]", ev, tc.wantEvent)
			}
		})
	}
}

// TestSyncResumedSD6: a resumed Deployment first records DeploymentResumed
// (SD-6, ST-18), then the rolling pass finds it complete and records
// NewReplicaSetAvailable, continuing from the written object (IM-2: no
// conflict, two status writes).
func TestSyncResumedSD6(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, DeploymentPaused, pausedMessage, baseTime)}}
	rs := withStatus(newRS(d, "nginx-a", "nginx:1.14.2", 3, 0, sizeAnnotations(3, 4, 1)), 3, 3)
	f := newFixture(t, d, rs)
	conflicts := f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(map[string]int{"update deployments/status": 2})
	if *conflicts != 0 {
		t.Errorf("%d self-inflicted conflicts (IM-2)", *conflicts)
	}
	var reasons []string
	for _, a := range f.client.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			if c := getCondition(&u.GetObject().(*appsv1.Deployment).Status, appsv1.DeploymentProgressing); c != nil {
				reasons = append(reasons, c.Reason)
			}
		}
	}
	if strings.Join(reasons, ",") != DeploymentResumed+","+NewReplicaSetAvailable {
		t.Errorf("Progressing reasons written = %v, want [DeploymentResumed NewReplicaSetAvailable]", reasons)
	}
}

// TestSyncPausedScalesAndCleansUp: a paused Deployment still scales its
// active ReplicaSet (SD-7, SD-11, PS-1) and runs history cleanup (CL-1) but
// creates no ReplicaSet for its changed template.
func TestSyncPausedScalesAndCleansUp(t *testing.T) {
	d := newDeployment(6, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Paused = true
	d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	d.Spec.Template = podTemplate("nginx:changed-while-paused")
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{RevisionAnnotation: "1"}), 0, 0)
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	f := newFixture(t, d, old, cur)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	w := f.writes()
	if w["create replicasets"] != 0 || w["patch replicasets"] != 1 || w["delete replicasets"] != 1 {
		t.Errorf("writes %v, want 1 RS update, 1 RS delete, no create", w)
	}
	if got := f.rs("nginx-b"); *got.Spec.Replicas != 6 || got.Annotations[DesiredReplicasAnnotation] != "6" {
		t.Errorf("nginx-b = %d replicas, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
	if names := f.replicaSets(); len(names) != 1 || names[0].Name != "nginx-b" {
		t.Errorf("ReplicaSets left = %v, want only nginx-b", names)
	}
}

// TestSyncUnknownStrategySD10: an unknown strategy type is an error naming it.
func TestSyncUnknownStrategySD10(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
	f := newFixture(t, d)
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "unexpected deployment strategy type: BlueGreen") {
		t.Fatalf("err = %v", err)
	}
	if w := f.writes(); w["create replicasets"] != 0 {
		t.Errorf("writes %v: nothing may be created for an unknown strategy", w)
	}
}

// TestSyncAdoptionFailureStopsSD3: a failed adoption is returned and nothing
// else happens in that sync (SD-3).
func TestSyncAdoptionFailureStopsSD3(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := newRS(d, "orphan", "nginx:1", 1, 0, nil)
	orphan.OwnerReferences = nil
	f := newFixture(t, d, orphan)
	f.client.PrependReactor("patch", "replicasets", func(coreAction) (bool, runtimeObject, error) {
		return true, nil, errQuota
	})
	if _, err := f.sync(); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("err = %v, want the adoption error", err)
	}
	f.expectWrites(map[string]int{"patch replicasets": 1})
}
