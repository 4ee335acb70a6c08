package rolloutstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Annotations of EX-5 (progressive rollouts on the Deployment itself).
const (
	// RolloutStepsAnnotation opts a RollingUpdate Deployment into rollout steps (EX-5): an ordered YAML or JSON
	// list, each item one of `setWeight: P` (percent of spec.replicas on the new template, then hold),
	// `pause: {duration: D}` (hold D once the step before it is reached), `pause: {}` (hold until promoted) or
	// `analysis: {templates: [NAME…], args: [{name, value}]}` (hold until its metrics succeed, EX-6).
	// After the last step the rollout goes to 100%. It is a policy annotation (EX-0): every ReplicaSet carries it.
	RolloutStepsAnnotation = "kubedeploy.io/rollout-steps"
	// RolloutStepAnnotation is the controller's record of where a rollout with steps stands (StepState, JSON):
	// the revision it is for, the index of the current step and when that step started. Keyed to the revision,
	// it lets a restarted controller, a new leader or a shard's new owner resume the same step with the pause's
	// remaining time. Only the Deployment controller writes it.
	RolloutStepAnnotation = "kubedeploy.io/rollout-step"
	// RolloutPromoteAnnotation is written by `kubedeploy rollout promote`: "R/S" ends the pause of step S
	// (0-based) of revision R; "R/full" skips every step left of revision R. A value for another revision or
	// another step is ignored, so a promote never reaches a later rollout.
	RolloutPromoteAnnotation = "kubedeploy.io/rollout-promote"
	// RolloutAbortAnnotation is written by `kubedeploy rollout abort`: "R" rolls revision R back as EX-2 does, if
	// it is still the current revision and its rollout has not completed.
	RolloutAbortAnnotation = "kubedeploy.io/rollout-abort"
)

// Progressing reasons of EX-5.
const (
	// RolloutStepPaused is the Progressing=True reason while a rollout is held by a pause step (EX-5); the
	// progress deadline does not run meanwhile.
	RolloutStepPaused = "RolloutStepPaused"
	// InvalidRolloutSteps is the Progressing=False reason while a RolloutStepsAnnotation that kubedeploy cannot
	// use holds a rollout at the pods it has on the new template (0 for a new one), and the reason of the
	// Warning event naming the fault.
	InvalidRolloutSteps = "InvalidRolloutSteps"
)

// Step is one item of RolloutStepsAnnotation: exactly one field is set.
type Step struct {
	// SetWeight is the percent of spec.replicas, 0–100, the rollout puts on the new template before the next
	// step starts (StepPods gives it in pods).
	SetWeight *int32 `json:"setWeight,omitempty"`
	// Pause holds the rollout where the steps before it put it.
	Pause *StepPause `json:"pause,omitempty"`
	// Analysis holds the rollout while templates' metrics are measured (EX-6).
	Analysis *StepAnalysis `json:"analysis,omitempty"`
}

// StepPause is a pause step: for Duration (Go duration syntax, e.g. "10m", "30s") once the step starts, or,
// without one, until `kubedeploy rollout promote`.
type StepPause struct {
	Duration string `json:"duration,omitempty"`
}

// Steps is a parsed RolloutStepsAnnotation.
type Steps []Step

// StepsError is a RolloutStepsAnnotation kubedeploy cannot use: which step (1-based; 0 for the whole value)
// and what is wrong with it. Its Error is one line naming the annotation.
type StepsError struct {
	Step  int
	Fault string
}

func (e *StepsError) Error() string {
	if e.Step == 0 {
		return fmt.Sprintf("%s: %s", RolloutStepsAnnotation, e.Fault)
	}
	return fmt.Sprintf("%s: step %d: %s", RolloutStepsAnnotation, e.Step, e.Fault)
}

// StepsEffect says what the controller does while the steps are invalid.
const StepsEffect = "the rollout holds at the pods it has on the new template (0 for a new rollout) until the annotation is fixed or removed"

// HasRolloutSteps reports whether d carries RolloutStepsAnnotation (valid or not).
func HasRolloutSteps(d *appsv1.Deployment) bool {
	_, ok := d.Annotations[RolloutStepsAnnotation]
	return ok
}

// StepsOf reads d's steps (EX-5): nil, nil without the annotation. The error is a *StepsError when the value
// does not parse or breaks a rule (ParseSteps), when d's strategy is not RollingUpdate, or when d also has
// EX-1's partition (the two would each decide the new ReplicaSet's size).
func StepsOf(d *appsv1.Deployment) (Steps, *StepsError) {
	v, ok := d.Annotations[RolloutStepsAnnotation]
	if !ok {
		return nil, nil
	}
	steps, err := ParseSteps(v)
	if err != nil {
		return nil, err
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return nil, &StepsError{Fault: fmt.Sprintf("steps need strategy RollingUpdate, the Deployment's is %s", d.Spec.Strategy.Type)}
	}
	if _, ok := d.Annotations[RolloutPartitionAnnotation]; ok {
		return nil, &StepsError{Fault: fmt.Sprintf("steps and %s cannot be used together: remove one", RolloutPartitionAnnotation)}
	}
	return steps, nil
}

// ParseSteps parses a RolloutStepsAnnotation value, YAML or JSON. Refused, with a *StepsError naming the fault:
// a value that is not a list, an empty list, an unknown key, a step with no field or two, a setWeight outside
// 0–100 or not above the setWeight before it, a pause duration that does not parse or is not positive, an
// analysis without templates or with a template or arg named twice (StepAnalysis.check).
func ParseSteps(v string) (Steps, *StepsError) {
	steps, err := decodeSteps(v)
	if err != nil {
		return nil, &StepsError{Fault: "not a list of steps (setWeight, pause, analysis): " + oneLine(err.Error())}
	}
	if len(steps) == 0 {
		return nil, &StepsError{Fault: "no steps: remove the annotation for a plain rolling update"}
	}
	last := int32(-1)
	for i, s := range steps {
		if err := s.check(last); err != "" {
			return nil, &StepsError{Step: i + 1, Fault: err}
		}
		if s.SetWeight != nil {
			last = *s.SetWeight
		}
	}
	return steps, nil
}

// decodeSteps decodes v (YAML or JSON) with Kubernetes' strict rules: keys match field names exactly, case
// included (encoding/json, and so yaml.UnmarshalStrict alone, would take `SetWeight`), no unknown or duplicate
// keys. Values are decoded by yaml.UnmarshalStrict, which reads them for the field's type (an arg's `value: 5`
// is the string "5"); the keys are then checked on the plain JSON form.
func decodeSteps(v string) (Steps, error) {
	var steps Steps
	if err := yaml.UnmarshalStrict([]byte(v), &steps); err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict([]byte(v))
	if err != nil {
		return nil, err
	}
	var keys Steps
	strict, _ := kjson.UnmarshalStrict(js, &keys) // a value's type was checked above; only the keys here
	return steps, errors.Join(strict...)
}

// check returns what is wrong with s, "" if nothing; last is the setWeight of the steps before it, -1 for none.
func (s Step) check(last int32) string {
	set := 0
	for _, f := range []bool{s.SetWeight != nil, s.Pause != nil, s.Analysis != nil} {
		if f {
			set++
		}
	}
	switch {
	case set != 1:
		return "want exactly one of setWeight, pause, analysis"
	case s.Analysis != nil && s.Analysis.check() != "":
		return s.Analysis.check()
	case s.SetWeight != nil && (*s.SetWeight < 0 || *s.SetWeight > 100):
		return fmt.Sprintf("setWeight %d is outside 0–100", *s.SetWeight)
	case s.SetWeight != nil && *s.SetWeight <= last:
		return fmt.Sprintf("setWeight %d is not above the previous setWeight %d", *s.SetWeight, last)
	case s.Pause != nil && s.Pause.Duration != "":
		d, err := time.ParseDuration(s.Pause.Duration)
		if err != nil {
			return fmt.Sprintf("pause duration %q does not parse (want e.g. \"30s\", \"10m\")", s.Pause.Duration)
		}
		if d <= 0 {
			return fmt.Sprintf("pause duration %q is not positive", s.Pause.Duration)
		}
	}
	return ""
}

// oneLine joins a multi-line error message into one line, without the layers sigs.k8s.io/yaml and
// encoding/json put before what is wrong ("error unmarshaling JSON: while decoding JSON: json: ").
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for _, layer := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		s = strings.TrimPrefix(s, layer)
	}
	return s
}

// PauseDuration returns a timed pause's duration, 0 for an untimed one or a step that is not a pause.
func (s Step) PauseDuration() time.Duration {
	if s.Pause == nil || s.Pause.Duration == "" {
		return 0
	}
	d, _ := time.ParseDuration(s.Pause.Duration) // ParseSteps checked it
	return d
}

// WaitsFor says what ends step s: StepWaitPods for a setWeight (its pods available), StepWaitTime for a timed
// pause, StepWaitPromotion for an untimed one, StepWaitAnalysis for an analysis.
func (s Step) WaitsFor() StepWait {
	switch {
	case s.Analysis != nil:
		return StepWaitAnalysis
	case s.Pause != nil && s.PauseDuration() > 0:
		return StepWaitTime
	case s.Pause != nil:
		return StepWaitPromotion
	}
	return StepWaitPods
}

// String describes s for events and messages: "setWeight 20", "pause 10m0s", "pause until promoted".
func (s Step) String() string {
	switch {
	case s.SetWeight != nil:
		return fmt.Sprintf("setWeight %d", *s.SetWeight)
	case s.Pause != nil && s.Pause.Duration != "":
		return "pause " + s.PauseDuration().String()
	case s.Pause != nil:
		return "pause until promoted"
	case s.Analysis != nil:
		return s.Analysis.String()
	}
	return "empty step"
}

// StepPods returns the pods on the new template a setWeight of weight percent allows for a Deployment of
// replicas replicas (EX-5): weight percent of replicas rounded down as EX-1's "N%", but at least 1 when
// weight > 0 and replicas > 0, and at most replicas.
func StepPods(weight, replicas int32) int32 {
	replicas = max(replicas, 0)
	pods := int32(int64(weight) * int64(replicas) / 100)
	if weight > 0 && pods == 0 {
		pods = 1
	}
	return min(pods, replicas)
}

// WeightAt returns the setWeight in force while step i runs: step i's own if it is a setWeight, else the last
// setWeight before it, 0 when none is; 100 once every step is done (i ≥ len(steps)).
func (steps Steps) WeightAt(i int) int32 {
	if i >= len(steps) {
		return 100
	}
	for j := i; j >= 0; j-- {
		if w := steps[j].SetWeight; w != nil {
			return *w
		}
	}
	return 0
}

// StepState is RolloutStepAnnotation's value: the revision whose rollout the steps are running, the index of
// its current step (len(steps) once all are done) and when that step started (RFC 3339, whole seconds, rounded
// up).
type StepState struct {
	Revision int64       `json:"revision"`
	Step     int         `json:"step"`
	Since    metav1.Time `json:"since"`
}

// StepStateOf reads d's RolloutStepAnnotation; ok is false when it is missing or does not parse (the rollout
// then starts at step 0).
func StepStateOf(d *appsv1.Deployment) (StepState, bool) {
	var s StepState
	v, ok := d.Annotations[RolloutStepAnnotation]
	if !ok || json.Unmarshal([]byte(v), &s) != nil || s.Step < 0 {
		return StepState{}, false
	}
	return s, true
}

// RecordedStep returns d's valid steps and the state recorded for revision (its decimal form, as
// RevisionAnnotation holds it), ok only when both exist and the recorded step is one of the steps (not done).
func RecordedStep(d *appsv1.Deployment, revision string) (Steps, StepState, bool) {
	steps, invalid := StepsOf(d)
	st, ok := StepStateOf(d)
	if invalid != nil || steps == nil || !ok || strconv.FormatInt(st.Revision, 10) != revision || st.Step >= len(steps) {
		return nil, StepState{}, false
	}
	return steps, st, true
}

// Encode returns s as RolloutStepAnnotation's value.
func (s StepState) Encode() string {
	b, _ := json.Marshal(s) // plain fields: never fails
	return string(b)
}

// PromoteFull is the step part of a RolloutPromoteAnnotation value that skips every step left.
const PromoteFull = "full"

// PromoteValue returns RolloutPromoteAnnotation's value promoting step (0-based) of revision, or, with full,
// every step left of revision.
func PromoteValue(revision int64, step int, full bool) string {
	if full {
		return fmt.Sprintf("%d/%s", revision, PromoteFull)
	}
	return fmt.Sprintf("%d/%d", revision, step)
}

// promoted reports whether d's RolloutPromoteAnnotation promotes step of revision: full when it skips every step
// left, step when it ends step's pause.
func promoted(d *appsv1.Deployment, revision int64, step int) (full, this bool) {
	rev, what, ok := strings.Cut(d.Annotations[RolloutPromoteAnnotation], "/")
	if !ok || rev != strconv.FormatInt(revision, 10) {
		return false, false
	}
	if what == PromoteFull {
		return true, false
	}
	return false, what == strconv.Itoa(step)
}

// Promoted reports whether d's RolloutPromoteAnnotation promotes step (0-based; len(steps) once every step is
// done) of revision, or every step left of it.
func Promoted(d *appsv1.Deployment, revision int64, step int) bool {
	full, this := promoted(d, revision, step)
	return full || this
}

// AbortRequested reports whether d's RolloutAbortAnnotation asks to abort revision.
func AbortRequested(d *appsv1.Deployment, revision int64) bool {
	return revision > 0 && d.Annotations[RolloutAbortAnnotation] == strconv.FormatInt(revision, 10)
}

// StepWait is what a rollout with steps waits on at its current step.
type StepWait string

const (
	// StepWaitPods: the step's pods to be updated and available (a setWeight).
	StepWaitPods StepWait = "pods"
	// StepWaitTime: a timed pause to end.
	StepWaitTime StepWait = "pause"
	// StepWaitPromotion: `kubedeploy rollout promote` (an untimed pause).
	StepWaitPromotion StepWait = "promotion"
	// StepWaitAnalysis: an analysis step's run to succeed (EX-6), or a promote.
	StepWaitAnalysis StepWait = "analysis"
	// StepWaitNone: every step is done; the rollout goes to 100%.
	StepWaitNone StepWait = ""
)

// StepProgress is where a rollout with steps stands after AdvanceSteps.
type StepProgress struct {
	// State is the state to record: different from the stored one when a step started (Changed).
	State   StepState
	Changed bool
	// Started are the indexes of the steps that started in this advance, in order.
	Started []int
	// Partition is the limit on the new ReplicaSet the current step sets (EX-1's mechanics; Set false once
	// every step is done).
	Partition Partition
	// Wait is what the current step waits on; Remaining, for StepWaitTime, how long (> 0).
	Wait      StepWait
	Remaining time.Duration
}

// StepInput is what AdvanceSteps reads: the Deployment (its replicas, stored RolloutStepAnnotation and
// RolloutPromoteAnnotation), its valid steps, the revision of its new ReplicaSet (0 while there is none), the
// ReplicaSets (newRS may be nil) and now.
type StepInput struct {
	D        *appsv1.Deployment
	Steps    Steps
	Revision int64
	NewRS    *appsv1.ReplicaSet
	AllRSs   []*appsv1.ReplicaSet
	Now      time.Time
	// Held says the background analysis holds the rollout where it is (EX-6: paused for a human, or unable to
	// measure): no step starts, and the new ReplicaSet grows no more.
	Held bool
}

// AdvanceSteps returns where the rollout of in.Revision stands (EX-5): from the stored state when it is for
// that revision (else step 0, starting now), each step whose gate has passed is left for the next, in order,
// each starting when the one before it ended: a setWeight once its pods are updated and available and the old
// ReplicaSets hold the rest (StepReached), a timed pause once its duration has passed since it started, an
// untimed one once promoted, an analysis once its run is recorded Successful (EX-6) or it is promoted; a promote
// "full" ends them all. A state with a step past the list (the list was shortened) counts as done. The result's Partition is the current step's limit.
// While in.Held (a background analysis holds the rollout, EX-6) no step starts and the partition holds the new
// ReplicaSet where it is, steps done or not (Wait StepWaitAnalysis).
func AdvanceSteps(in StepInput) StepProgress {
	replicas := Replicas(in.D)
	stored, ok := StepStateOf(in.D)
	st := stored
	if !ok || stored.Revision != in.Revision {
		st = StepState{Revision: in.Revision, Since: metav1.NewTime(ceilSecond(in.Now))}
	}
	p := StepProgress{}
	if in.Held {
		p.State, p.Changed, p.Wait = st, !ok || st != stored, StepWaitAnalysis
		p.Partition = Partition{Set: true, Replicas: replicas} // 0 pods: where the rollout is (Limit)
		return p
	}
	for st.Step < len(in.Steps) {
		full, this := promoted(in.D, in.Revision, st.Step)
		if full {
			st.Step = len(in.Steps)
			p.Started = append(p.Started, st.Step)
			break
		}
		wait, remaining := stepGate(in, st, this, replicas)
		if wait != StepWaitNone {
			p.Wait, p.Remaining = wait, remaining
			break
		}
		end := in.Now
		if d := in.Steps[st.Step].PauseDuration(); d > 0 && !this {
			end = st.Since.Add(d) // a timed pause ends when it was due, even if seen later
		}
		st = StepState{Revision: in.Revision, Step: st.Step + 1, Since: metav1.NewTime(ceilSecond(end))}
		p.Started = append(p.Started, st.Step)
	}
	p.State = st
	p.Changed = !ok || st != stored
	if st.Step < len(in.Steps) {
		p.Partition = Partition{Set: true, Pods: StepPods(in.Steps.WeightAt(st.Step), replicas), Replicas: replicas}
	}
	return p
}

// ceilSecond rounds t up to a whole second, the resolution RolloutStepAnnotation keeps: a pause then lasts
// its duration at least, never less, and at most a second more.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// stepGate returns what step st.Step still waits on, StepWaitNone when its gate has passed; promoted says
// RolloutPromoteAnnotation ends this step.
func stepGate(in StepInput, st StepState, promoted bool, replicas int32) (StepWait, time.Duration) {
	s := in.Steps[st.Step]
	switch {
	case s.SetWeight != nil:
		if in.Revision == 0 || !StepReached(in.NewRS, in.AllRSs, StepPods(*s.SetWeight, replicas), replicas) {
			return StepWaitPods, 0
		}
	case promoted:
	case s.PauseDuration() > 0:
		if left := st.Since.Add(s.PauseDuration()).Sub(in.Now); left > 0 {
			return StepWaitTime, left
		}
	case s.Analysis != nil:
		rec := AnalysisRecordOf(in.D, in.Revision)
		if run := rec.Run(st.Step); run == nil || run.Phase != AnalysisSuccessful {
			return StepWaitAnalysis, 0
		}
	default:
		return StepWaitPromotion, 0
	}
	return StepWaitNone, 0
}

// StepReached reports whether a setWeight of pods pods is reached: newRS has at least pods replicas, that many
// available, for its current generation, and the ReplicaSets' replicas add up to replicas (the old ones hold the
// rest, no surge left). 0 pods is reached at once.
func StepReached(newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet, pods, replicas int32) bool {
	if pods == 0 {
		return true
	}
	if newRS == nil || ReplicaSetReplicas(newRS) < pods || newRS.Status.AvailableReplicas < pods ||
		newRS.Status.ObservedGeneration < newRS.Generation {
		return false
	}
	var total int64
	for _, rs := range allRSs {
		if rs != nil {
			total += int64(ReplicaSetReplicas(rs))
		}
	}
	return total <= int64(replicas) || pods >= replicas
}

// StepsApply reports whether d's rollout to its new ReplicaSet of revision runs through steps: not when no old
// ReplicaSet has replicas (a Deployment's first rollout, or one scaled to 0: nothing to keep), and not for the
// rollback EX-2 or an abort made (revision = FailedRevisionAnnotation + 1), which goes straight to 100%.
func StepsApply(d *appsv1.Deployment, revision int64, newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) bool {
	if failed, err := strconv.ParseInt(d.Annotations[FailedRevisionAnnotation], 10, 64); err == nil && revision > 0 && revision == failed+1 {
		return false
	}
	return Partition{Set: true}.Limit(newRS, allRSs) != math.MaxInt32
}

// StepPausedMessage is the Progressing=True message while pause step st.Step of steps holds subject, of
// Deployment name, with updated of replicas pods on the new template (EX-5): which step, and until when (a
// timed pause's end, RFC 3339) or the command that ends it. It does not count down, so an unchanged hold is not
// rewritten.
func StepPausedMessage(subject, name string, steps Steps, st StepState, updated, replicas int32) string {
	if st.Step >= len(steps) {
		return fmt.Sprintf("%s has %d of %d pods updated; every rollout step is done.", subject, updated, replicas)
	}
	s := steps[st.Step]
	if d := s.PauseDuration(); d > 0 {
		return fmt.Sprintf("%s has %d of %d pods updated, held by rollout step %d of %d (%s) until %s.",
			subject, updated, replicas, st.Step+1, len(steps), s, st.Since.Add(d).UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s has %d of %d pods updated, held by rollout step %d of %d (%s): kubedeploy rollout promote deploy/%s.",
		subject, updated, replicas, st.Step+1, len(steps), s, name)
}
