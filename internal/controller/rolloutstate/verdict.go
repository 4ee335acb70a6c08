package rolloutstate

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// Phase is where a rollout stands, as `kubectl rollout status` judges it, with kubedeploy's extensions.
type Phase string

// The phases of a rollout.
const (
	// PhaseProgressing: the controller has not observed the current generation, or the rollout is under way
	// (including a paused one, and a failed one the controller is about to roll back, EX-2).
	PhaseProgressing Phase = "Progressing"
	// PhaseComplete: every replica updated and available, no old one left (ST-9).
	PhaseComplete Phase = "Complete"
	// PhaseHeld: held at its partition (EX-1, HeldAtPartition), whether or not the pods kept on the old
	// template are available.
	PhaseHeld Phase = "Held"
	// PhaseInvalid: held where it is by a kubedeploy.io/rollout-partition value that does not parse (EX-1); it
	// moves again only once the value is fixed or removed.
	PhaseInvalid Phase = "Invalid"
	// PhaseFailed: Progressing=False with ProgressDeadlineExceeded (ST-13), not to be rolled back.
	PhaseFailed Phase = "Failed"
	// PhaseRolledBack: an automatic rollback (EX-2) completed; the failed revision is AutoRolledBackFrom's.
	PhaseRolledBack Phase = "RolledBack"
)

// Verdict is where a Deployment's rollout stands, decided once for the Deployment controller's conditions,
// `rollout plan`, `rollout watch`, observe mode and the rollout metrics, so that all of them say the same of
// the same objects.
type Verdict struct {
	Phase Phase
	// Summary is the verdict in one line for people, e.g. "held by kubedeploy.io/rollout-partition: 15 of 20
	// pods updated; 5 pods kept on the old template are unavailable".
	Summary string
	// Updated is status.updatedReplicas and Replicas spec.replicas, in pods.
	Updated, Replicas int32
	// KeptBackUnavailable is, for PhaseHeld, how many pods kept on the old template are unavailable.
	KeptBackUnavailable int32
	// Invalid is, for PhaseInvalid, the partition value's error.
	Invalid *PolicyError
}

// VerdictOf returns where d's rollout stands from its stored status and rss, d's ReplicaSets (any order), in
// this order: PhaseProgressing until the controller observed the current generation, and while d's status does
// not yet count rss as they are (statusCounts: the two were read at different moments, e.g. from two watches,
// and a verdict mixing them could name pods as unavailable that the ReplicaSets show available); PhaseComplete (ST-9),
// or PhaseRolledBack when the completed rollout is an automatic rollback's (EX-2); PhaseInvalid while an
// invalid partition holds it (EX-1: there are old pods to keep and the new ReplicaSet is below
// spec.replicas); PhaseHeld at its partition (HeldAtPartition, from the counts, so with or
// without a progress deadline); PhaseFailed on ProgressDeadlineExceeded unless AutoRollbackPending (then
// PhaseProgressing: the rollback's rollout follows); else PhaseProgressing.
func VerdictOf(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) Verdict {
	if d.Status.ObservedGeneration < d.Generation {
		return VerdictGiven(d, rss, nil) // the new ReplicaSet plays no part
	}
	return VerdictGiven(d, rss, NewReplicaSet(d, rss))
}

// VerdictGiven is VerdictOf for a caller that has d's new ReplicaSet already: newRS must be NewReplicaSet(d,
// rss) (nil for none), which VerdictOf would otherwise compute by comparing each ReplicaSet's pod template with
// d's. The rollout metrics' Tracker uses it so that one observation compares the templates once.
func VerdictGiven(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) Verdict {
	st := &d.Status
	v := Verdict{Updated: st.UpdatedReplicas, Replicas: Replicas(d)}
	counts := fmt.Sprintf("%d of %d pods updated", v.Updated, v.Replicas)
	if st.ObservedGeneration < d.Generation {
		return v.with(PhaseProgressing, fmt.Sprintf("waiting for the controller to observe generation %d", d.Generation))
	}
	if !statusCounts(d, rss, newRS) {
		return v.with(PhaseProgressing, fmt.Sprintf("progressing: %s, %d available (the controller has not yet counted its ReplicaSets' latest status)",
			counts, st.AvailableReplicas))
	}
	if Complete(d, st) {
		if failed, ok := AutoRolledBackFrom(d); ok {
			return v.with(PhaseRolledBack, RolledBackMessage(d, failed))
		}
		return v.with(PhaseComplete, fmt.Sprintf("complete: %d of %d pods updated and available", v.Updated, v.Replicas))
	}
	if sv, ok := stepsVerdict(d, rss, newRS, v); ok {
		return sv
	}
	p, invalid := PartitionOf(d)
	limit := p.Limit(newRS, rss)
	if invalid != nil && limit < v.Replicas {
		v.Invalid = invalid
		return v.with(PhaseInvalid, InvalidPartitionMessage(invalid, v.Updated, v.Replicas))
	}
	if HeldAtPartition(d, st, newRS, limit) {
		v.KeptBackUnavailable = KeptBackUnavailable(d, st)
		return v.with(PhaseHeld, HeldSummary(v.Updated, v.Replicas, v.KeptBackUnavailable))
	}
	if DeadlineExceeded(st) {
		if AutoRollbackPending(d, rss) {
			return v.with(PhaseProgressing, "exceeded its progress deadline; rolling back automatically ("+RollbackOnProgressDeadlineAnnotation+")")
		}
		return v.with(PhaseFailed, fmt.Sprintf("exceeded its progress deadline%s: %s", progressDeadline(d), counts))
	}
	if d.Spec.Paused {
		return v.with(PhaseProgressing, "paused: "+counts)
	}
	return v.with(PhaseProgressing, fmt.Sprintf("progressing: %s, %d available", counts, st.AvailableReplicas)+stepNote(d, rss, newRS))
}

// stepNote is "; rollout step 3 of 4 (setWeight 50: 5 pods)" while d's rollout runs a setWeight step of its
// rollout steps (EX-5), from the stored RolloutStepAnnotation, "" otherwise: what the rollout is on its way to.
func stepNote(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) string {
	if newRS == nil {
		return ""
	}
	steps, st, ok := RecordedStep(d, newRS.Annotations[RevisionAnnotation])
	if !ok || steps[st.Step].SetWeight == nil || !StepsApply(d, st.Revision, newRS, rss) {
		return ""
	}
	return fmt.Sprintf("; rollout step %d of %d (%s: %d pods)", st.Step+1, len(steps), steps[st.Step], StepPods(*steps[st.Step].SetWeight, Replicas(d)))
}

// stepsVerdict is VerdictOf for a Deployment with rollout steps (EX-5) whose rollout they hold, from the stored
// RolloutStepAnnotation: PhaseInvalid while invalid steps hold it (there are old pods to keep and the new
// ReplicaSet is below spec.replicas); at a pause step whose pods are updated and available (HeldAtPartition at
// the step's count), PhaseHeld for an untimed pause (it waits for `kubedeploy rollout promote`) and
// PhaseProgressing for a timed one (it goes on by itself). ok is false otherwise.
func stepsVerdict(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, v Verdict) (Verdict, bool) {
	if !HasRolloutSteps(d) {
		return v, false
	}
	var rev int64
	if newRS != nil {
		rev, _ = strconv.ParseInt(newRS.Annotations[RevisionAnnotation], 10, 64)
	}
	if !StepsApply(d, rev, newRS, rss) {
		return v, false
	}
	if _, invalid := StepsOf(d); invalid != nil {
		if (Partition{Set: true, Replicas: v.Replicas}).Limit(newRS, rss) >= v.Replicas {
			return v, false
		}
		v.Invalid = &PolicyError{Annotation: RolloutStepsAnnotation, Value: d.Annotations[RolloutStepsAnnotation], Fault: invalid.Error(), Effect: StepsEffect}
		return v.with(PhaseInvalid, fmt.Sprintf("%v; holding %d of %d pods on the new template until the annotation is fixed or removed", invalid, v.Updated, v.Replicas)), true
	}
	steps, state, ok := RecordedStep(d, strconv.FormatInt(rev, 10))
	if !ok || steps[state.Step].Pause == nil {
		return v, false
	}
	limit := (Partition{Set: true, Pods: StepPods(steps.WeightAt(state.Step), v.Replicas), Replicas: v.Replicas}).Limit(newRS, rss)
	if !HeldAtPartition(d, &d.Status, newRS, limit) {
		return v, false
	}
	v.KeptBackUnavailable = KeptBackUnavailable(d, &d.Status)
	summary := StepSummary(steps, state, v.Updated, v.Replicas) + keptBack(v.KeptBackUnavailable)
	if steps[state.Step].PauseDuration() > 0 {
		return v.with(PhaseProgressing, summary), true
	}
	return v.with(PhaseHeld, summary), true
}

// StepSummary is the one-line verdict of a rollout held by pause step st.Step of steps with updated of replicas
// pods updated: "held by rollout step 4 of 4 (pause until promoted): 5 of 10 pods updated", a timed pause's
// end added.
func StepSummary(steps Steps, st StepState, updated, replicas int32) string {
	s := steps[st.Step]
	out := fmt.Sprintf("held by rollout step %d of %d (%s): %d of %d pods updated", st.Step+1, len(steps), s, updated, replicas)
	if d := s.PauseDuration(); d > 0 {
		out += "; resumes at " + st.Since.Add(d).UTC().Format(time.RFC3339)
	}
	return out
}

// statusCounts reports whether d's stored status counts rss, d's ReplicaSets (any order; nil entries skipped), as
// they are: the counts a verdict reads, replicas, updatedReplicas and availableReplicas, equal ReplicaCounts(rss,
// newRS), newRS being NewReplicaSet(d, rss) (ST-2). The controller's status write after a ReplicaSet's status
// change makes it true again; until then the two are not one snapshot.
func statusCounts(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	c, st := ReplicaCounts(rss, newRS), &d.Status
	return c.Replicas == st.Replicas && c.UpdatedReplicas == st.UpdatedReplicas && c.AvailableReplicas == st.AvailableReplicas
}

func (v Verdict) with(p Phase, summary string) Verdict {
	v.Phase, v.Summary = p, summary
	return v
}

// PhaseOf returns VerdictOf(d, rss).Phase.
func PhaseOf(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) Phase {
	return VerdictOf(d, rss).Phase
}

// HeldSummary is the one-line verdict of a rollout held at its partition (EX-1) with updated of replicas pods
// updated and keptBackUnavailable of the pods kept on the old template unavailable.
func HeldSummary(updated, replicas, keptBackUnavailable int32) string {
	return fmt.Sprintf("held by %s: %d of %d pods updated", RolloutPartitionAnnotation, updated, replicas) + keptBack(keptBackUnavailable)
}

// HeldMessage is the message of the Progressing condition with reason RolloutPartitioned (EX-1): subject
// (`ReplicaSet "web-5d4f"`) and HeldSummary's counts.
func HeldMessage(subject string, updated, replicas, keptBackUnavailable int32) string {
	return fmt.Sprintf("%s has %d of %d pods updated, held by %s", subject, updated, replicas, RolloutPartitionAnnotation) +
		keptBack(keptBackUnavailable) + "."
}

// keptBack is "; N pods kept on the old template are unavailable", or "" for none.
func keptBack(n int32) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "; 1 pod kept on the old template is unavailable"
	}
	return fmt.Sprintf("; %d pods kept on the old template are unavailable", n)
}

// InvalidPartitionMessage is both the one-line verdict and the message of the Progressing condition with
// reason InvalidRolloutPartition (EX-1): the value, what it wants, and where the rollout holds.
func InvalidPartitionMessage(err *PolicyError, updated, replicas int32) string {
	return fmt.Sprintf("stuck on an invalid value: %v; %s: %d of %d pods updated", err, err.Effect, updated, replicas)
}

// progressDeadline returns " of <progressDeadlineSeconds>s", or "" when d has no deadline.
func progressDeadline(d *appsv1.Deployment) string {
	if !HasProgressDeadline(d) {
		return ""
	}
	return fmt.Sprintf(" of %ds", *d.Spec.ProgressDeadlineSeconds)
}

// RolledBackMessage says why d was rolled back from revision failed (FailedRevisionAnnotation), from the
// objects alone: aborted by `kubedeploy rollout abort` (RolloutAbortAnnotation names that revision), aborted
// by a failed analysis (EX-6: its record has a Failed run; the message names the metric that failed first), or
// else by EX-2 on its progress deadline.
func RolledBackMessage(d *appsv1.Deployment, failed int64) string {
	if RolledBackOnDeadline(d, failed) {
		return fmt.Sprintf("rolled back automatically from revision %d, which exceeded its progress deadline", failed)
	}
	if AbortRequested(d, failed) {
		return fmt.Sprintf("rolled back from revision %d, aborted by `kubedeploy rollout abort`", failed)
	}
	rec := AnalysisRecordOf(d, failed)
	for _, run := range rec.Runs {
		if run.Phase != AnalysisFailed {
			continue
		}
		for _, m := range run.Metrics {
			if m.Failed > 0 {
				return fmt.Sprintf("rolled back from revision %d, whose analysis failed on metric %q", failed, m.Name)
			}
		}
		return fmt.Sprintf("rolled back from revision %d, whose analysis failed", failed)
	}
	return fmt.Sprintf("rolled back from revision %d", failed)
}

// RolledBackOnDeadline reports whether d's rollback from revision failed was EX-2's, on its progress deadline:
// neither an abort by hand (RolloutAbortAnnotation names failed) nor one by a failed analysis (a Failed run in
// failed's record, EX-6).
func RolledBackOnDeadline(d *appsv1.Deployment, failed int64) bool {
	if AbortRequested(d, failed) {
		return false
	}
	rec := AnalysisRecordOf(d, failed)
	for _, run := range rec.Runs {
		if run.Phase == AnalysisFailed {
			return false
		}
	}
	return true
}
