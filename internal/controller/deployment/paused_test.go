package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// TestSyncPausedSD6: pausing records DeploymentPaused and creates no RS.
func TestSyncPausedSD6(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Paused = true
	f := newFixture(t, d)
	f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if w := f.Writes(); w["create replicasets"] != 0 || w["update deployments/status"] == 0 {
		t.Errorf("writes %v", w)
	}
	p := rolloutstate.Condition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Reason != DeploymentPaused || p.Status != v1.ConditionUnknown || p.Message != pausedMessage {
		t.Errorf("Progressing = %+v", p)
	}
}

// TestSyncResumedSD6: a resumed Deployment first records DeploymentResumed
// (SD-6, ST-18), then the rolling pass finds it complete and records
// rolloutstate.NewReplicaSetAvailable, continuing from the written object (IM-2: no
// conflict, two status writes).
func TestSyncResumedSD6(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "1"}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, DeploymentPaused, pausedMessage, baseTime)}}
	rs := withStatus(newRS(d, "nginx-a", "nginx:1.14.2", 3, 0, sizeAnnotations(3, 4, 1)), 3, 3)
	f := newFixture(t, d, rs)
	conflicts := f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectWrites(map[string]int{"update deployments/status": 2})
	if *conflicts != 0 {
		t.Errorf("%d self-inflicted conflicts (IM-2)", *conflicts)
	}
	var reasons []string
	for _, a := range f.Client.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			if c := rolloutstate.Condition(&u.GetObject().(*appsv1.Deployment).Status, appsv1.DeploymentProgressing); c != nil {
				reasons = append(reasons, c.Reason)
			}
		}
	}
	if strings.Join(reasons, ",") != DeploymentResumed+","+rolloutstate.NewReplicaSetAvailable {
		t.Errorf("Progressing reasons written = %v, want [DeploymentResumed rolloutstate.NewReplicaSetAvailable]", reasons)
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
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2"}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{rolloutstate.RevisionAnnotation: "1"}), 0, 0)
	cur := withStatus(newRS(d, "nginx-b", "nginx:1.14.2", 3, 1, sizeAnnotations(3, 4, 2)), 3, 3)
	f := newFixture(t, d, old, cur)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	w := f.Writes()
	if w["create replicasets"] != 0 || w["patch replicasets"] != 1 || w["delete replicasets"] != 1 {
		t.Errorf("writes %v, want 1 RS update, 1 RS delete, no create", w)
	}
	if got := f.rs("nginx-b"); *got.Spec.Replicas != 6 || got.Annotations[rolloutstate.DesiredReplicasAnnotation] != "6" {
		t.Errorf("nginx-b = %d replicas, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
	if names := f.replicaSets(); len(names) != 1 || names[0].Name != "nginx-b" {
		t.Errorf("ReplicaSets left = %v, want only nginx-b", names)
	}
}
