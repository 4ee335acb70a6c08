package rolloutstate

import (
	"time"

	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// verdictFixture is a RollingUpdate Deployment of 4 replicas at revision 2 (template web:2), its new
// ReplicaSet "new" and the ReplicaSet "old" of revision 1 (web:1), with sizes and availability set by the case.
type verdictFixture struct {
	d        *appsv1.Deployment
	new, old *appsv1.ReplicaSet
}

func newVerdictFixture(newSize, newAvailable, oldSize, oldAvailable int32) verdictFixture {
	replicas, deadline := int32(4), int32(60)
	one := intstr.FromInt32(1)
	tmpl := func(image string) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}}}
	}
	rs := func(name, rev, image string, size, available int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Annotations: map[string]string{RevisionAnnotation: rev}},
			Spec:       appsv1.ReplicaSetSpec{Replicas: &size, Template: tmpl(image)},
			Status:     appsv1.ReplicaSetStatus{Replicas: size, AvailableReplicas: available, ReadyReplicas: available},
		}
	}
	f := verdictFixture{new: rs("new", "2", "web:2", newSize, newAvailable), old: rs("old", "1", "web:1", oldSize, oldAvailable)}
	f.d = &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2, Annotations: map[string]string{RevisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, ProgressDeadlineSeconds: &deadline, Template: tmpl("web:2"),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: newSize + oldSize, UpdatedReplicas: newSize,
			AvailableReplicas: newAvailable + oldAvailable, ReadyReplicas: newAvailable + oldAvailable},
	}
	return f
}

func (f verdictFixture) rss() []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{f.old, f.new} }

func (f verdictFixture) progressing(status v1.ConditionStatus, reason string) verdictFixture {
	f.d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason}}
	return f
}

func (f verdictFixture) annotate(kv ...string) verdictFixture {
	for i := 0; i < len(kv); i += 2 {
		f.d.Annotations[kv[i]] = kv[i+1]
	}
	return f
}

// TestVerdictOf (ST-9, ST-13, EX-1, EX-2): where a rollout stands, decided once from the stored objects, with
// the one-line summary every view prints. Held is judged from the counts, so it holds with or without a
// progress deadline, and whether or not the pods kept on the old template are available.
func TestVerdictOf(t *testing.T) {
	noDeadline := func(f verdictFixture) verdictFixture {
		f.d.Spec.ProgressDeadlineSeconds = new(int32(math.MaxInt32))
		return f
	}
	for _, tc := range []struct {
		name        string
		f           verdictFixture
		want        Phase
		wantSummary string
	}{
		{"complete", newVerdictFixture(4, 4, 0, 0), PhaseComplete, "complete: 4 of 4 pods updated and available"},
		{"generation not observed", func() verdictFixture { f := newVerdictFixture(4, 4, 0, 0); f.d.Generation = 3; return f }(),
			PhaseProgressing, "waiting for the controller to observe generation 3"},
		{"under way", newVerdictFixture(2, 1, 3, 3).progressing(v1.ConditionTrue, "ReplicaSetUpdated"), PhaseProgressing,
			"progressing: 2 of 4 pods updated, 4 available"},
		{"held at its partition", newVerdictFixture(2, 2, 2, 2).annotate(RolloutPartitionAnnotation, "2"), PhaseHeld,
			"held by kubedeploy.io/rollout-partition: 2 of 4 pods updated"},
		{"held without a progress deadline", noDeadline(newVerdictFixture(2, 2, 2, 2).annotate(RolloutPartitionAnnotation, "50%")), PhaseHeld,
			"held by kubedeploy.io/rollout-partition: 2 of 4 pods updated"},
		{"held with unavailable pods kept back", newVerdictFixture(2, 2, 2, 0).annotate(RolloutPartitionAnnotation, "2"), PhaseHeld,
			"held by kubedeploy.io/rollout-partition: 2 of 4 pods updated; 2 pods kept on the old template are unavailable"},
		{"not held while new pods are unavailable", newVerdictFixture(2, 1, 2, 2).annotate(RolloutPartitionAnnotation, "2"), PhaseProgressing, ""},
		{"invalid partition holds it", newVerdictFixture(1, 1, 3, 3).annotate(RolloutPartitionAnnotation, "banana"), PhaseInvalid,
			`stuck on an invalid value: kubedeploy.io/rollout-partition "banana": want a whole number of pods ("5") or a percentage of spec.replicas ("25%"); the rollout holds where it is: 1 of 4 pods updated`},
		{"invalid partition on a complete rollout", newVerdictFixture(4, 4, 0, 0).annotate(RolloutPartitionAnnotation, "banana"), PhaseComplete, ""},
		{"invalid partition on a first rollout holds nothing", func() verdictFixture {
			f := newVerdictFixture(2, 2, 0, 0).annotate(RolloutPartitionAnnotation, "banana")
			return f
		}(), PhaseProgressing, ""},
		{"deadline exceeded", newVerdictFixture(2, 0, 3, 3).progressing(v1.ConditionFalse, ProgressDeadlineExceeded), PhaseFailed,
			"exceeded its progress deadline of 60s: 2 of 4 pods updated"},
		{"deadline exceeded, rollback due", newVerdictFixture(2, 0, 3, 3).progressing(v1.ConditionFalse, ProgressDeadlineExceeded).
			annotate(RollbackOnProgressDeadlineAnnotation, "true", CompleteRevisionAnnotation, "1"), PhaseProgressing, ""},
		{"deadline exceeded, opted in, nothing completed before", newVerdictFixture(2, 0, 3, 3).progressing(v1.ConditionFalse, ProgressDeadlineExceeded).
			annotate(RollbackOnProgressDeadlineAnnotation, "true"), PhaseFailed, ""},
		{"status behind its ReplicaSets at the partition (issue 44)", func() verdictFixture {
			f := newVerdictFixture(2, 2, 2, 2).annotate(RolloutPartitionAnnotation, "2")
			f.d.Status.AvailableReplicas, f.d.Status.ReadyReplicas = 2, 2 // written before the new pods turned available
			return f
		}(), PhaseProgressing, "progressing: 2 of 4 pods updated, 2 available (the controller has not yet counted its ReplicaSets' latest status)"},
		{"status ahead of its ReplicaSets", func() verdictFixture {
			f := newVerdictFixture(4, 4, 0, 0)
			f.new.Status.AvailableReplicas = 3 // the ReplicaSet watch is behind the Deployment's
			return f
		}(), PhaseProgressing, ""},
		{"automatic rollback complete", newVerdictFixture(4, 4, 0, 0).annotate(FailedRevisionAnnotation, "1"), PhaseRolledBack,
			"rolled back automatically from revision 1, which exceeded its progress deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := VerdictOf(tc.f.d, tc.f.rss())
			if got.Phase != tc.want || (tc.wantSummary != "" && got.Summary != tc.wantSummary) {
				t.Errorf("VerdictOf = %s %q, want %s %q", got.Phase, got.Summary, tc.want, tc.wantSummary)
			}
			if p := PhaseOf(tc.f.d, tc.f.rss()); p != got.Phase {
				t.Errorf("PhaseOf = %s, VerdictOf says %s", p, got.Phase)
			}
		})
	}
}

// EX-2 names the revision it means: the last complete revision may be the ReplicaSet being rolled out now,
// renumbered by a rollback (RV-2), rather than gone.
func TestPlanAutoRollbackNamesTheRevision(t *testing.T) {
	f := newVerdictFixture(2, 0, 3, 3).progressing(v1.ConditionFalse, ProgressDeadlineExceeded).
		annotate(RollbackOnProgressDeadlineAnnotation, "true", CompleteRevisionAnnotation, "4")
	f.d.Annotations[RevisionAnnotation] = "6"
	f.new.Annotations[RevisionAnnotation] = "6"
	f.new.Annotations[RevisionHistoryAnnotation] = "2,4"
	p := PlanAutoRollback(f.d, f.new, []*appsv1.ReplicaSet{f.old})
	if p.Target != nil || !strings.Contains(p.Skipped, "revision 4, the last that completed, is the one that failed (now revision 6)") {
		t.Errorf("plan: target %v, skipped %q", p.Target, p.Skipped)
	}
	f.old.Annotations[RevisionHistoryAnnotation] = "4"
	f.new.Annotations[RevisionHistoryAnnotation] = "2"
	if p := PlanAutoRollback(f.d, f.new, []*appsv1.ReplicaSet{f.old}); p.Target != f.old {
		t.Errorf("plan: target %v, skipped %q; want the old ReplicaSet, whose history holds 4", p.Target, p.Skipped)
	}
}

// EX-2 reads the last complete revision from the ReplicaSets' own records (CompletedAtRevisionAnnotation), so a
// hand-run `kubectl rollout undo`, which drops the Deployment's annotations, loses nothing: the highest record
// wins; the failing ReplicaSet's own record means there is nothing earlier to return to; a later complete
// revision the Deployment shows whose ReplicaSet is gone is not replaced by an older one.
func TestPlanAutoRollbackFromRecords(t *testing.T) {
	f := newVerdictFixture(2, 0, 3, 3).progressing(v1.ConditionFalse, ProgressDeadlineExceeded).
		annotate(RollbackOnProgressDeadlineAnnotation, "true")
	f.d.Annotations[RevisionAnnotation], f.new.Annotations[RevisionAnnotation] = "5", "5"
	older := f.old.DeepCopy()
	older.Name, older.UID = "older", "uid-older"
	older.Annotations = map[string]string{RevisionAnnotation: "2", CompletedAtRevisionAnnotation: "2"}
	f.old.Annotations[CompletedAtRevisionAnnotation] = "4"
	olds := []*appsv1.ReplicaSet{older, f.old}
	if p := PlanAutoRollback(f.d, f.new, olds); p.Target != f.old || p.Failed != 5 {
		t.Errorf("plan: target %v, failed %d, skipped %q; want the ReplicaSet recorded complete at 4", p.Target, p.Failed, p.Skipped)
	}
	f.d.Annotations[CompleteRevisionAnnotation] = "4" // shown, and agreeing: no change
	if p := PlanAutoRollback(f.d, f.new, olds); p.Target != f.old {
		t.Errorf("plan with the Deployment showing 4: target %v, skipped %q", p.Target, p.Skipped)
	}
	f.d.Annotations[CompleteRevisionAnnotation] = "6"
	if p := PlanAutoRollback(f.d, f.new, olds); p.Target != nil || !strings.Contains(p.Skipped, "revision 6, the last that completed, no longer exists") {
		t.Errorf("plan with a later complete revision gone: target %v, skipped %q", p.Target, p.Skipped)
	}
	delete(f.d.Annotations, CompleteRevisionAnnotation)
	f.new.Annotations[CompletedAtRevisionAnnotation] = "3" // renumbered since: the last record is still f.old's 4
	if p := PlanAutoRollback(f.d, f.new, olds); p.Target != f.old {
		t.Errorf("plan with an older record on the failing ReplicaSet: target %v, skipped %q", p.Target, p.Skipped)
	}
	f.new.Annotations[CompletedAtRevisionAnnotation] = "5"
	if p := PlanAutoRollback(f.d, f.new, olds); p.Target != nil || !strings.Contains(p.Skipped, "revision 5, the last that completed, is the one that failed") {
		t.Errorf("plan with the failing ReplicaSet recorded last: target %v, skipped %q", p.Target, p.Skipped)
	}
	if rs, rev := LastComplete(append(olds, nil, f.new)); rs != f.new || rev != 5 {
		t.Errorf("LastComplete = %v, %d; want the new ReplicaSet at 5", rs, rev)
	}
}

// EX-0 leaves a ReplicaSet's own record (CompletedAtRevisionAnnotation) where it is while the Deployment is
// opted into EX-2, removes it once it is not, and removes other bookkeeping.
func TestSetPolicyAnnotationsKeepsTheReplicaSetsRecord(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RollbackOnProgressDeadlineAnnotation: "true"}}}
	rs := map[string]string{CompletedAtRevisionAnnotation: "3", FailedRevisionAnnotation: "2", RollbackOnProgressDeadlineAnnotation: "true"}
	if PolicyAnnotationsDiffer(d, map[string]string{CompletedAtRevisionAnnotation: "3", RollbackOnProgressDeadlineAnnotation: "true"}) {
		t.Errorf("PolicyAnnotationsDiffer: the record alone counts as a difference")
	}
	got, changed := SetPolicyAnnotations(d, rs)
	if !changed || got[CompletedAtRevisionAnnotation] != "3" || got[FailedRevisionAnnotation] != "" {
		t.Errorf("SetPolicyAnnotations = %v (changed %v); want the record kept and failed-revision removed", got, changed)
	}
	out := &appsv1.Deployment{} // taken out of EX-2: the records go with the policy
	if !PolicyAnnotationsDiffer(out, got) {
		t.Errorf("PolicyAnnotationsDiffer: a record on a ReplicaSet of a Deployment out of EX-2 is no difference")
	}
	if got, _ := SetPolicyAnnotations(out, got); len(got) != 0 {
		t.Errorf("SetPolicyAnnotations out of EX-2 = %v, want nothing of kubedeploy's", got)
	}
}

// EX-5, EX-6: a completed rollback from failed-revision names its cause: an abort by hand, a failed analysis
// (its metric), else EX-2's progress deadline.
func TestVerdictNamesTheRollbackCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    verdictFixture
		want string
	}{
		{"abort by hand (EX-5)", newVerdictFixture(4, 4, 0, 0).annotate(FailedRevisionAnnotation, "1").annotate(RolloutAbortAnnotation, "1"),
			"rolled back from revision 1, aborted by `kubedeploy rollout abort`"},
		{"a failed analysis (EX-6)", newVerdictFixture(4, 4, 0, 0).annotate(FailedRevisionAnnotation, "1").annotate(RolloutAnalysisStateAnnotation, failedAnalysisRecord(1)),
			`rolled back from revision 1, whose analysis failed on metric "error-rate"`},
		{"another revision's analysis (EX-2)", newVerdictFixture(4, 4, 0, 0).annotate(FailedRevisionAnnotation, "1").annotate(RolloutAnalysisStateAnnotation, failedAnalysisRecord(7)),
			"rolled back automatically from revision 1, which exceeded its progress deadline"},
	} {
		if got := VerdictOf(tc.f.d, tc.f.rss()); got.Phase != PhaseRolledBack || got.Summary != tc.want {
			t.Errorf("%s: %s %q, want RolledBack %q", tc.name, got.Phase, got.Summary, tc.want)
		}
	}
}

// failedAnalysisRecord is the record of revision rev whose analysis at step 1 failed on metric error-rate.
func failedAnalysisRecord(rev int64) string {
	rec := AnalysisRecord{Revision: rev}
	run := rec.Start(1, time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	run.Phase = AnalysisFailed
	run.Metric("latency").Record(Measurement{Phase: MeasurementSuccessful, Value: "0.1"})
	run.Metric("error-rate").Record(Measurement{Phase: MeasurementFailed, Value: "0.4"})
	return rec.Encode()
}
