package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// TestSyncRollback: RB-3/RB-5/RB-6 via the annotation with target 0.
func TestSyncRollback(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2", rolloutstate.RollbackToAnnotation: "0", "note": "dropped"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{rolloutstate.RevisionAnnotation: "1", "kubernetes.io/change-cause": "v1"}), 0, 0)
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	f := newFixture(t, d, old, cur)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// RV-2 copies the "note" annotation to the new RS first; then the rollback patch.
	f.ExpectWrites(map[string]int{"patch deployments": 1, "patch replicasets": 1})
	got := f.deployment()
	if got.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("template image = %s", got.Spec.Template.Spec.Containers[0].Image)
	}
	if _, ok := got.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("hash label copied into the deployment template")
	}
	if _, ok := got.Annotations[rolloutstate.RollbackToAnnotation]; ok || got.Annotations["note"] != "" || got.Annotations["kubernetes.io/change-cause"] != "v1" || got.Annotations[rolloutstate.RevisionAnnotation] != "2" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if ev := f.Events(); len(ev) != 1 || ev[0] != `Normal DeploymentRollback Rolled back deployment "nginx" to revision 1` {
		t.Errorf("events = %q", ev)
	}
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
			f.ExpectWrites(map[string]int{"patch deployments": 1})
			got := f.deployment()
			if _, ok := got.Annotations[rolloutstate.RollbackToAnnotation]; ok {
				t.Errorf("rollback annotation not cleared: %v", got.Annotations)
			}
			if img := got.Spec.Template.Spec.Containers[0].Image; img != tc.wantImage {
				t.Errorf("template image = %s, want %s", img, tc.wantImage)
			}
			if ev := f.Events(); len(ev) != 1 || ev[0] != tc.wantEvent {
				t.Errorf("events = %q, want [%q]", ev, tc.wantEvent)
			}
		})
	}
}

// rollbackFixture is a Deployment of 3 replicas at revision 2 (template
// nginx:1.14.2, ReplicaSet nginx-b) with an older revision-1 ReplicaSet
// nginx-a (nginx:1), asking to roll back to revision `to`.
func rollbackFixture(t *testing.T, to string, withOld bool) *fixture {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2", rolloutstate.RollbackToAnnotation: to}
	progressing := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.NewReplicaSetAvailable, "done", baseTime)
	d.Status.Conditions = []appsv1.DeploymentCondition{progressing}
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	if !withOld {
		cur.Annotations[rolloutstate.RevisionAnnotation] = "1"
		d.Annotations[rolloutstate.RevisionAnnotation] = "1"
		return newFixture(t, d, cur)
	}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{rolloutstate.RevisionAnnotation: "1"}), 0, 0)
	return newFixture(t, d, old, cur)
}
