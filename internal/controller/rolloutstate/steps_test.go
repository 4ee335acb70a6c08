package rolloutstate

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EX-5: the example parses, as YAML and as JSON; every invalid list is refused with the step and the
// fault named.
func TestParseSteps(t *testing.T) {
	steps, err := ParseSteps("- setWeight: 20\n- pause: {duration: 10m}\n- setWeight: 50\n- pause: {}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"setWeight 20", "pause 10m0s", "setWeight 50", "pause until promoted"}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for i, s := range steps {
		if s.String() != want[i] {
			t.Errorf("step %d = %s, want %s", i+1, s, want[i])
		}
	}
	if js, err := ParseSteps(`[{"setWeight":20},{"pause":{"duration":"10m"}}]`); err != nil || js[1].PauseDuration() != 10*time.Minute {
		t.Errorf("JSON: %v, %v", js, err)
	}
	for _, tc := range []struct{ v, fault string }{
		{"setWeight: 20", "not a list of steps"},
		{"- setWeight: 20\n  pause: {}", "step 1: want exactly one of"},
		{"- {}", "step 1: want exactly one of"},
		{"- setWeight: 101", "step 1: setWeight 101 is outside 0–100"},
		{"- setWeight: -1", "step 1: setWeight -1 is outside 0–100"},
		{"- setWeight: 50\n- setWeight: 20", "step 2: setWeight 20 is not above the previous setWeight 50"},
		{"- setWeight: 50\n- pause: {}\n- setWeight: 50", "step 3: setWeight 50 is not above"},
		{"- pause: {duration: ten}", `step 1: pause duration "ten" does not parse`},
		{"- pause: {duration: 0s}", `step 1: pause duration "0s" is not positive`},
		{"- setWeigth: 20", `not a list of steps (setWeight, pause, analysis): unknown field "setWeigth"`},
		{"- SetWeight: 20", `unknown field "[0].SetWeight"`},
		{"- setWeight: 20\n- Pause: {}", `unknown field "[1].Pause"`},
		{"- setWeight: 20\n  setWeight: 30", "not a list of steps"},
		{"- pause: {duration: 1m, forever: true}", "not a list of steps"},
		{"- setWeight: 20%", "not a list of steps"},
		{"- analysis: {}", "step 1: analysis names no templates"},
		{"- analysis: {templates: [Error_Rate]}", `step 1: analysis template "Error_Rate" is not a ConfigMap name`},
		{"- analysis: {templates: [a, a]}", `step 1: analysis template "a" is named twice`},
		{"- analysis: {templates: [a], args: [{value: x}]}", "step 1: analysis arg without a name"},
		{"- analysis: {templates: [a], args: [{name: h, value: x}, {name: h, value: y}]}", `step 1: analysis arg "h" is given twice`},
		{"- analysis: {template: [a]}", `unknown field "template"`},
		{"[]", "no steps"},
		{"", "no steps"},
	} {
		_, err := ParseSteps(tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.fault) || !strings.HasPrefix(err.Error(), RolloutStepsAnnotation+": ") {
			t.Errorf("ParseSteps(%q) = %v, want an error with %q", tc.v, err, tc.fault)
		}
	}
}

// EX-5: steps with EX-1's partition, or on a Recreate Deployment, are refused.
func TestStepsOfRefusesPartitionAndRecreate(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RolloutStepsAnnotation: "- setWeight: 20"}}}
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	if _, err := StepsOf(d); err != nil {
		t.Fatal(err)
	}
	d.Annotations[RolloutPartitionAnnotation] = "5"
	if _, err := StepsOf(d); err == nil || !strings.Contains(err.Error(), "cannot be used together") {
		t.Errorf("with a partition: %v", err)
	}
	delete(d.Annotations, RolloutPartitionAnnotation)
	d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	if _, err := StepsOf(d); err == nil || !strings.Contains(err.Error(), "RollingUpdate") {
		t.Errorf("on Recreate: %v", err)
	}
	if errs := PolicyErrors(d); len(errs) != 1 || errs[0].Annotation != RolloutStepsAnnotation || !strings.Contains(errs[0].Error(), "RollingUpdate") {
		t.Errorf("PolicyErrors = %v", errs)
	}
}

// EX-5: a setWeight is EX-1's "N%" rounded down, at least 1 pod when above 0, at most replicas.
func TestStepPods(t *testing.T) {
	for _, tc := range []struct{ weight, replicas, want int32 }{
		{20, 10, 2}, {50, 10, 5}, {100, 10, 10}, {0, 10, 0}, {1, 10, 1}, {5, 3, 1}, {99, 3, 2}, {20, 0, 0}, {33, 100, 33},
	} {
		if got := StepPods(tc.weight, tc.replicas); got != tc.want {
			t.Errorf("StepPods(%d, %d) = %d, want %d", tc.weight, tc.replicas, got, tc.want)
		}
	}
}

// stepsWorld is a Deployment of 10 replicas rolling from ReplicaSet "old" to "new" (revision 2).
type stepsWorld struct {
	d        *appsv1.Deployment
	old, new *appsv1.ReplicaSet
	steps    Steps
}

func newStepsWorld(t *testing.T, v string) *stepsWorld {
	t.Helper()
	steps, err := ParseSteps(v)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{RolloutStepsAnnotation: v}}}
	d.Spec.Replicas = new(int32(10))
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	rs := func(name, rev string, replicas int32) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Annotations: map[string]string{RevisionAnnotation: rev}}}
		r.Spec.Replicas = new(replicas)
		r.Status.AvailableReplicas = replicas
		return r
	}
	return &stepsWorld{d: d, old: rs("old", "1", 10), new: rs("new", "2", 0), steps: steps}
}

// at puts n replicas on the new ReplicaSet, available ones of them, the rest on the old one, all available.
func (w *stepsWorld) at(n, available int32) {
	*w.new.Spec.Replicas, w.new.Status.AvailableReplicas = n, available
	*w.old.Spec.Replicas, w.old.Status.AvailableReplicas = 10-n, 10-n
}

// advance runs AdvanceSteps at now and records its state on d, as the controller does.
func (w *stepsWorld) advance(now time.Time) StepProgress {
	p := AdvanceSteps(StepInput{D: w.d, Steps: w.steps, Revision: 2, NewRS: w.new, AllRSs: []*appsv1.ReplicaSet{w.old, w.new}, Now: now})
	w.d.Annotations[RolloutStepAnnotation] = p.State.Encode()
	return p
}

// EX-5 through the example: 20% held until its 2 pods are available, then a 12 s pause kept across
// a reread state, then 50%, then held until promoted; a promote of another step or revision does nothing.
func TestAdvanceSteps(t *testing.T) {
	w := newStepsWorld(t, "- setWeight: 20\n- pause: {duration: 12s}\n- setWeight: 50\n- pause: {}\n")
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	p := w.advance(t0)
	if p.State.Step != 0 || p.Wait != StepWaitPods || p.Partition.Pods != 2 || !p.Changed {
		t.Fatalf("start: %+v", p)
	}
	w.at(2, 1)
	if p = w.advance(t0.Add(time.Second)); p.State.Step != 0 || p.Changed {
		t.Fatalf("2 pods, 1 available: %+v", p)
	}
	w.at(2, 2)
	p = w.advance(t0.Add(5 * time.Second))
	if p.State.Step != 1 || p.Wait != StepWaitTime || p.Remaining != 12*time.Second || p.Partition.Pods != 2 || len(p.Started) != 1 {
		t.Fatalf("20%% reached: %+v", p)
	}
	// A new controller (the state read back from the annotation) resumes the pause where it was.
	if p = w.advance(t0.Add(15 * time.Second)); p.State.Step != 1 || p.Remaining != 2*time.Second || p.Changed {
		t.Fatalf("10 s into the pause: %+v", p)
	}
	p = w.advance(t0.Add(18 * time.Second))
	if p.State.Step != 2 || p.Wait != StepWaitPods || p.Partition.Pods != 5 || !p.State.Since.Time.Equal(t0.Add(17*time.Second)) {
		t.Fatalf("pause over: %+v", p)
	}
	w.at(5, 5)
	if p = w.advance(t0.Add(30 * time.Second)); p.State.Step != 3 || p.Wait != StepWaitPromotion || p.Partition.Pods != 5 {
		t.Fatalf("50%% reached: %+v", p)
	}
	for _, stale := range []string{"1/3", "2/1", "2/", "3/full"} {
		w.d.Annotations[RolloutPromoteAnnotation] = stale
		if p = w.advance(t0.Add(time.Hour)); p.State.Step != 3 || p.Changed {
			t.Fatalf("promote %q: %+v", stale, p)
		}
	}
	w.d.Annotations[RolloutPromoteAnnotation] = PromoteValue(2, 3, false)
	if p = w.advance(t0.Add(time.Hour)); p.State.Step != 4 || p.Partition.Set || p.Wait != StepWaitNone {
		t.Fatalf("promoted: %+v", p)
	}
}

// EX-5: a new revision starts at step 0; "full" skips every step; a state for a step past a shortened list
// counts as done; a pause first holds at 0 pods.
func TestAdvanceStepsRevisionsAndFull(t *testing.T) {
	w := newStepsWorld(t, "- pause: {}\n- setWeight: 50\n")
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	w.d.Annotations[RolloutStepAnnotation] = StepState{Revision: 1, Step: 2, Since: metav1.NewTime(t0)}.Encode()
	p := w.advance(t0)
	if p.State != (StepState{Revision: 2, Since: metav1.NewTime(t0)}) || p.Wait != StepWaitPromotion || p.Partition.Pods != 0 || !p.Partition.Set {
		t.Fatalf("new revision: %+v", p)
	}
	w.d.Annotations[RolloutPromoteAnnotation] = PromoteValue(2, 0, true)
	if p = w.advance(t0); p.State.Step != 2 || p.Partition.Set {
		t.Fatalf("promote full: %+v", p)
	}
	delete(w.d.Annotations, RolloutPromoteAnnotation)
	w.d.Annotations[RolloutStepAnnotation] = StepState{Revision: 2, Step: 7, Since: metav1.NewTime(t0)}.Encode()
	if p = w.advance(t0); p.Partition.Set || p.Changed {
		t.Fatalf("past the list: %+v", p)
	}
	w.d.Annotations[RolloutStepAnnotation] = "{not json"
	if p = w.advance(t0); p.State.Step != 0 || !p.Changed {
		t.Fatalf("broken state: %+v", p)
	}
}

// EX-5: no steps for a first rollout, nor for the rollback an abort or EX-2 made.
func TestStepsApply(t *testing.T) {
	w := newStepsWorld(t, "- setWeight: 20")
	all := []*appsv1.ReplicaSet{w.old, w.new}
	if !StepsApply(w.d, 2, w.new, all) {
		t.Error("a rollout from old to new: steps do not apply")
	}
	if StepsApply(w.d, 2, w.new, []*appsv1.ReplicaSet{w.new}) {
		t.Error("a first rollout: steps apply")
	}
	w.d.Annotations[FailedRevisionAnnotation] = "1"
	if StepsApply(w.d, 2, w.new, all) {
		t.Error("the rollback from revision 1: steps apply")
	}
	if !StepsApply(w.d, 3, w.new, all) {
		t.Error("revision 3 after the rollback: steps do not apply")
	}
}

// EX-5: the Progressing message names the step and, for a timed pause, its end; for an untimed one, the
// command that ends it.
func TestStepPausedMessage(t *testing.T) {
	steps, err := ParseSteps("- setWeight: 20\n- pause: {duration: 12s}\n- pause: {}\n")
	if err != nil {
		t.Fatal(err)
	}
	since := metav1.NewTime(time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		step int
		want string
	}{
		{1, `ReplicaSet "web-1" has 2 of 10 pods updated, held by rollout step 2 of 3 (pause 12s) until 2026-11-28T05:00:12Z.`},
		{2, `ReplicaSet "web-1" has 2 of 10 pods updated, held by rollout step 3 of 3 (pause until promoted): kubedeploy rollout promote deploy/web.`},
	} {
		if got := StepPausedMessage(`ReplicaSet "web-1"`, "web", steps, StepState{Revision: 2, Step: tc.step, Since: since}, 2, 10); got != tc.want {
			t.Errorf("step %d: %q, want %q", tc.step+1, got, tc.want)
		}
	}
}

// EX-5: a rollout on its way to a setWeight says which step in its verdict; without steps nothing is added.
func TestVerdictNamesTheSetWeightStep(t *testing.T) {
	w := newStepsWorld(t, "- setWeight: 20\n- pause: {}\n- setWeight: 50\n")
	w.d.Generation, w.d.Status.ObservedGeneration = 2, 2
	w.d.Spec.Template = w.new.Spec.Template
	w.at(5, 2)
	w.new.Status.Replicas, w.old.Status.Replicas = 5, 5
	w.d.Annotations[RolloutStepAnnotation] = StepState{Revision: 2, Step: 2}.Encode()
	w.d.Status.Replicas, w.d.Status.UpdatedReplicas, w.d.Status.AvailableReplicas = 10, 5, 7
	v := VerdictOf(w.d, []*appsv1.ReplicaSet{w.old, w.new})
	if want := "progressing: 5 of 10 pods updated, 7 available; rollout step 3 of 3 (setWeight 50: 5 pods)"; v.Phase != PhaseProgressing || v.Summary != want {
		t.Errorf("verdict %s %q, want %q", v.Phase, v.Summary, want)
	}
	delete(w.d.Annotations, RolloutStepsAnnotation)
	if v := VerdictOf(w.d, []*appsv1.ReplicaSet{w.old, w.new}); v.Summary != "progressing: 5 of 10 pods updated, 7 available" {
		t.Errorf("without steps: %q", v.Summary)
	}
}

// EX-5, EX-6: keys are matched exactly (case included), values read for their field's type: an arg's
// `value: 5` is the string "5". (Unquoted y/n/yes/no are YAML 1.1 booleans and read as "true"/"false", as
// everywhere sigs.k8s.io/yaml reads Kubernetes objects: quote them.)
func TestDecodeStepsStrictKeysTypedValues(t *testing.T) {
	steps, err := decodeSteps(`- analysis: {templates: [a], args: [{name: canary, value: "y"}, {name: replicas, value: 5}]}`)
	if err != nil || len(steps) != 1 || steps[0].Analysis.ArgsMap()["canary"] != "y" || steps[0].Analysis.ArgsMap()["replicas"] != "5" {
		t.Fatalf("decodeSteps = %+v, %v", steps, err)
	}
	if _, err := decodeSteps("- analysis: {Templates: [a]}"); err == nil || !strings.Contains(err.Error(), `unknown field "[0].analysis.Templates"`) {
		t.Errorf("Templates: %v, want an unknown field", err)
	}
}
