package deployment

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// failedDeployment returns the seed-sized Deployment opted into EX-2 at
// revision 2 (nginx:2, failed: Progressing=False rolloutstate.ProgressDeadlineExceeded),
// whose revision 1 (nginx:1, ReplicaSet nginx-a) completed, and its two
// ReplicaSets.
func failedDeployment(annotations map[string]string) (*appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.ReplicaSet) {
	surge, unavailable := pct25()
	d := newDeployment(20, surge, unavailable)
	d.Spec.Template = podTemplate("nginx:2")
	d.Annotations = map[string]string{
		rolloutstate.RevisionAnnotation:                   "2",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true",
		rolloutstate.CompleteRevisionAnnotation:           "1",
		rolloutstate.RolloutPartitionAnnotation:           "50%",
		"team":                                            "web",
	}
	for k, v := range annotations {
		if v == "" {
			delete(d.Annotations, k)
		} else {
			d.Annotations[k] = v
		}
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 25, UpdatedReplicas: 10, AvailableReplicas: 15, ReadyReplicas: 15,
		Conditions: []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, rolloutstate.ProgressDeadlineExceeded, "timed out", baseTime)},
	}
	old := withStatus(newRS(d, "nginx-a", "nginx:1", 15, 0, map[string]string{
		rolloutstate.RevisionAnnotation: "1", rolloutstate.DesiredReplicasAnnotation: "20", rolloutstate.MaxReplicasAnnotation: "25",
		"kubernetes.io/change-cause": "v1", rolloutstate.RolloutPartitionAnnotation: "5",
	}), 15, 15)
	cur := withStatus(newRS(d, "nginx-b", "nginx:2", 10, 1, map[string]string{
		rolloutstate.RevisionAnnotation: "2", rolloutstate.DesiredReplicasAnnotation: "20", rolloutstate.MaxReplicasAnnotation: "25",
	}), 10, 0)
	return d, old, cur
}

// EX-2: a failed rollout of an opted-in Deployment is rolled back to the
// last complete revision as `kubectl rollout undo` does: template and the
// ReplicaSet's annotations, but kubedeploy's own annotations stay the
// Deployment's, the failed revision is recorded, the Warning event names both
// revisions, and the progress deadline starts afresh.
func TestAutoRollback(t *testing.T) {
	d, old, cur := failedDeployment(nil)
	f := newFixture(t, d, old, cur)
	f.observe()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	got := f.deployment()
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "nginx:1" {
		t.Errorf("template image %q, want nginx:1", img)
	}
	if _, ok := got.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Errorf("template kept the pod-template-hash label: %v", got.Spec.Template.Labels)
	}
	for k, want := range map[string]string{
		rolloutstate.FailedRevisionAnnotation:             "2",
		rolloutstate.RevisionAnnotation:                   "2", // the controller advances it with the ReplicaSet (RV-2)
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true",
		rolloutstate.RolloutPartitionAnnotation:           "50%", // the Deployment's, not the ReplicaSet's "5"
		"kubernetes.io/change-cause":                      "v1",  // from the ReplicaSet, as kubectl does
	} {
		if got.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got.Annotations[k], want, got.Annotations)
		}
	}
	if _, ok := got.Annotations["team"]; ok {
		t.Errorf("annotation team kept: kubectl rollout undo replaces the Deployment's annotations with the ReplicaSet's")
	}
	c := rolloutstate.Condition(&got.Status, appsv1.DeploymentProgressing)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != ReplicaSetUpdated || !strings.Contains(c.Message, "from revision 2") {
		t.Errorf("Progressing after the rollback: %+v", c)
	}
	events := f.Events()
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "Warning "+AutoRolledBack) && strings.Contains(e, "from revision 2") && strings.Contains(e, "to revision 1")
	}) {
		t.Errorf("events %q: want a Warning %s naming revisions 2 and 1", events, AutoRolledBack)
	}
}

// EX-2 never loops and leaves alone what is not its business.
func TestAutoRollbackSkipped(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		paused      bool
		wantSkipped string // rolloutstate.PlanAutoRollback's reason; "" when not even considered
	}{
		{name: "annotation off, upstream behaviour", annotations: map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: ""}},
		{name: "annotation not true", annotations: map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "yes"}},
		{name: "paused", paused: true},
		{name: "the failed rollout is the rollback", annotations: map[string]string{rolloutstate.FailedRevisionAnnotation: "1"}, wantSkipped: "left failed"},
		{name: "nothing completed before", annotations: map[string]string{rolloutstate.CompleteRevisionAnnotation: ""}, wantSkipped: "no complete revision is recorded"},
		{name: "the complete revision's ReplicaSet is gone", annotations: map[string]string{rolloutstate.CompleteRevisionAnnotation: "7"}, wantSkipped: "no longer exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, old, cur := failedDeployment(tc.annotations)
			d.Spec.Paused = tc.paused
			if tc.wantSkipped != "" {
				if p := rolloutstate.PlanAutoRollback(d, cur, []*appsv1.ReplicaSet{old}); p.Target != nil || !strings.Contains(p.Skipped, tc.wantSkipped) {
					t.Errorf("plan: target %v, skipped %q; want skipped with %q", p.Target, p.Skipped, tc.wantSkipped)
				}
			}
			f := newFixture(t, d, old, cur)
			f.observe()
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			got := f.deployment()
			if img := got.Spec.Template.Spec.Containers[0].Image; img != "nginx:2" {
				t.Errorf("template image %q, want nginx:2 (not rolled back)", img)
			}
			if events := f.Events(); slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, AutoRolledBack) }) {
				t.Errorf("events %q: rolled back", events)
			}
		})
	}
}

// EX-2 bookkeeping: the Deployment shows the highest revision its ReplicaSets record as complete, written again
// after an undo dropped it, never lowered, and the ReplicaSet's own record an undo copied onto it is removed; a
// Deployment not opted in gets nothing.
func TestRecordCompleteRevision(t *testing.T) {
	d, old, cur := failedDeployment(map[string]string{rolloutstate.CompleteRevisionAnnotation: ""})
	old.Annotations[rolloutstate.CompletedAtRevisionAnnotation] = "1"
	cur.Annotations[rolloutstate.CompletedAtRevisionAnnotation] = "4"
	rss := []*appsv1.ReplicaSet{old, cur}
	d.Annotations[rolloutstate.CompletedAtRevisionAnnotation] = "1" // copied by a hand undo
	if !recordCompleteRevision(d, rss) || d.Annotations[rolloutstate.CompleteRevisionAnnotation] != "4" {
		t.Errorf("recorded %q, want 4", d.Annotations[rolloutstate.CompleteRevisionAnnotation])
	}
	if _, ok := d.Annotations[rolloutstate.CompletedAtRevisionAnnotation]; ok {
		t.Errorf("the ReplicaSet's record stayed on the Deployment: %v", d.Annotations)
	}
	if recordCompleteRevision(d, rss) {
		t.Errorf("recorded twice")
	}
	d.Annotations[rolloutstate.CompleteRevisionAnnotation] = "7" // its ReplicaSet deleted by history cleanup
	if recordCompleteRevision(d, rss) || d.Annotations[rolloutstate.CompleteRevisionAnnotation] != "7" {
		t.Errorf("lowered to %q, want 7 kept", d.Annotations[rolloutstate.CompleteRevisionAnnotation])
	}
	off, _, _ := failedDeployment(map[string]string{rolloutstate.CompleteRevisionAnnotation: "", rolloutstate.RollbackOnProgressDeadlineAnnotation: ""})
	if recordCompleteRevision(off, rss) || off.Annotations[rolloutstate.CompleteRevisionAnnotation] != "" {
		t.Errorf("not opted in: recorded %q", off.Annotations[rolloutstate.CompleteRevisionAnnotation])
	}
}
