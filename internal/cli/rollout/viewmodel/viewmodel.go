// Package viewmodel is what `rollout watch` shows of one Deployment's
// rollout, computed from the objects alone: its counts and conditions, its
// ReplicaSets, why the new ReplicaSet's pods are not available, its latest
// events, where the rollout stands and how the watch ends. Both the plain
// lines and the terminal view draw a Model; neither judges the rollout
// itself.
//
// It is pure: no client, no clock (the caller passes now), no terminal. The
// judgements come from rolloutstate (the phase, the new ReplicaSet, ST-9's
// complete) and unavailable (why a pod is not available), the packages the
// controllers use, so the view never re-derives what the controller decides.
package viewmodel

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// MaxPodNames is how many pod names a why-line lists before "and N more".
const MaxPodNames = 10

// ErrDeadline is wrapped by Outcome's error when the Deployment exceeded its
// progress deadline (ST-13), rolled back automatically or not (EX-2).
var ErrDeadline = errors.New("exceeded its progress deadline")

// ErrInvalidPolicy is wrapped by Outcome's error while a kubedeploy.io/ policy
// value that does not parse holds the rollout (rolloutstate.PhaseInvalid).
// `kubedeploy rollout watch` and `rollout plan` exit with its ExitCode,
// InvalidPolicyExitCode, so that a pipeline can tell a typo from a failed
// rollout (exit 1).
var ErrInvalidPolicy error = exitError{"is stuck on an invalid kubedeploy.io/ value", InvalidPolicyExitCode}

// InvalidPolicyExitCode is the exit code of `rollout watch` and `rollout plan`
// while an invalid kubedeploy.io/ value holds the rollout.
const InvalidPolicyExitCode = 3

// exitError is an error that names the process exit code it ends with.
type exitError struct {
	msg  string
	code int
}

func (e exitError) Error() string { return e.msg }

// ExitCode is the exit code of a command that ends with e.
func (e exitError) ExitCode() int { return e.code }

// Input is what the view is computed from: the objects as a cache holds them.
type Input struct {
	Deployment *appsv1.Deployment
	// ReplicaSets may hold any ReplicaSets of the namespace, in any order:
	// those the Deployment does not control are left out.
	ReplicaSets []*appsv1.ReplicaSet
	// Pods may hold any pods: only those the new ReplicaSet controls are
	// looked at.
	Pods []*v1.Pod
	// Events may hold any events: only the Deployment's of its current
	// rollout are kept, the latest MaxEvents of them (0: none).
	Events    []*v1.Event
	MaxEvents int
	// RolloutStart is when the current rollout began, as a watch tracks it
	// (StartTracker.Observe); zero: RolloutStart's, from the objects alone.
	// Events that last happened before its second are left out.
	RolloutStart time.Time
	// Nodes are the cluster's nodes (names and labels are read), for the Spread of a Deployment annotated
	// kubedeploy.io/scale-down-spread (EX-4); nil shows none.
	Nodes []*v1.Node
	// AnalysisTemplates are the analysis templates of the Deployment's namespace the watch can read (ConfigMaps
	// labelled kubedeploy.io/analysis-template), for the counts and conditions of the analyses' metrics (EX-6);
	// nil shows the recorded measurements without them.
	AnalysisTemplates []*v1.ConfigMap
}

// Model is one look at a rollout.
type Model struct {
	// Deployment is the object the model was built from (read-only).
	Deployment *appsv1.Deployment
	// Replicas is spec.replicas with its default (pods).
	Replicas int32
	// Phase is where the rollout stands (rolloutstate.VerdictOf).
	Phase rolloutstate.Phase
	// Verdict is rolloutstate.VerdictOf's whole verdict: Phase and the
	// one-line Summary every view prints.
	Verdict rolloutstate.Verdict
	// ReplicaSets are the rows to draw: the new ReplicaSet first (when there
	// is one), then every old one that still has pods or a size, by name.
	ReplicaSets []ReplicaSet
	// Stuck are the new ReplicaSet's unavailable pods grouped by reason,
	// largest group first; empty once the rollout is complete.
	Stuck []unavailable.Group
	// RolloutStart is when the current rollout began (Input.RolloutStart).
	RolloutStart time.Time
	// Events are the Deployment's latest events of the current rollout,
	// oldest first.
	Events []v1.Event
	// Spread is how the Deployment's pods stand across the topology domains of its
	// kubedeploy.io/scale-down-spread (EX-4); nil without the annotation or Input.Nodes.
	Spread *Spread
	// Analysis is the analyses of the rollout in progress (EX-6): its analysis step's run and its background
	// run; nil when it has none, or once it ended.
	Analysis *Analysis
}

// ReplicaSet is one row of the view.
type ReplicaSet struct {
	Name string
	// Revision is the deployment.kubernetes.io/revision annotation.
	Revision string
	// New is set on the Deployment's new ReplicaSet (RV-1).
	New bool
	// Desired is spec.replicas; Ready and Available are from its status (pods).
	Desired, Ready, Available int32
	// Fraction is Available over the Deployment's replicas, in [0, 1]: how
	// full its progress bar is.
	Fraction float64
}

// Build returns the model of in at now (now ages the why-messages, "not
// Ready after 12s").
func Build(in Input, now time.Time) *Model {
	d := in.Deployment
	owned := rolloutstate.ControlledBy(in.ReplicaSets, d.UID)
	verdict := rolloutstate.VerdictOf(d, owned)
	m := &Model{Deployment: d, Replicas: rolloutstate.Replicas(d), Phase: verdict.Phase, Verdict: verdict}
	newRS := rolloutstate.NewReplicaSet(d, owned)
	if newRS != nil {
		m.ReplicaSets = append(m.ReplicaSets, m.row(newRS, true))
	}
	var old []*appsv1.ReplicaSet
	for _, rs := range owned {
		if rs != newRS && (rolloutstate.ReplicaSetReplicas(rs) > 0 || rs.Status.Replicas > 0) {
			old = append(old, rs)
		}
	}
	slices.SortFunc(old, func(a, b *appsv1.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	for _, rs := range old {
		m.ReplicaSets = append(m.ReplicaSets, m.row(rs, false))
	}
	if newRS != nil && m.Phase != rolloutstate.PhaseComplete && m.Phase != rolloutstate.PhaseRolledBack {
		m.Stuck = unavailable.Groups(rolloutstate.ControlledBy(in.Pods, newRS.UID), d.Spec.MinReadySeconds, now)
	}
	m.RolloutStart = in.RolloutStart
	if m.RolloutStart.IsZero() {
		m.RolloutStart, _ = RolloutStart(d, owned)
	}
	m.Events = latestEvents(d, in.Events, in.MaxEvents, m.RolloutStart)
	m.Spread = spreadOf(d, owned, newRS, in.Pods, in.Nodes)
	m.Analysis = analysisOf(d, newRS, m.Phase, in.AnalysisTemplates)
	return m
}

func (m *Model) row(rs *appsv1.ReplicaSet, isNew bool) ReplicaSet {
	r := ReplicaSet{
		Name: rs.Name, Revision: rs.Annotations[rolloutstate.RevisionAnnotation], New: isNew,
		Desired: rolloutstate.ReplicaSetReplicas(rs), Ready: rs.Status.ReadyReplicas, Available: rs.Status.AvailableReplicas,
	}
	if m.Replicas > 0 {
		r.Fraction = min(1, float64(r.Available)/float64(m.Replicas))
	}
	return r
}

// latestEvents returns d's events among events (by involvedObject kind and
// name, and UID when the event has one: an earlier Deployment of the same
// name is not d) that last happened in since's second or later (event times
// have whole seconds), the latest n, oldest first.
func latestEvents(d *appsv1.Deployment, events []*v1.Event, n int, since time.Time) []v1.Event {
	if n <= 0 {
		return nil
	}
	since = since.Truncate(time.Second)
	var evs []v1.Event
	for _, e := range events {
		o := e.InvolvedObject
		if o.Kind == "Deployment" && o.Name == d.Name && (o.UID == "" || o.UID == d.UID) && !EventTime(*e).Before(since) {
			evs = append(evs, *e)
		}
	}
	slices.SortFunc(evs, CompareEvents)
	return evs[max(0, len(evs)-n):]
}

// CompareEvents orders events by time (EventTime), then by name: the times
// have whole seconds, and client-go names an event NAME.<hex of its
// UnixNano>, so the name orders the events of one second.
func CompareEvents(a, b v1.Event) int {
	return cmp.Or(EventTime(a).Compare(EventTime(b)), cmp.Compare(len(a.Name), len(b.Name)), strings.Compare(a.Name, b.Name))
}

// EventTime is when e last happened: its lastTimestamp, else its eventTime,
// else its creationTimestamp (the zero time when it has none).
func EventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// Outcome is how a watch of this rollout ends: done with nil when it is
// complete or held at its partition (EX-1); done with an error wrapping
// ErrDeadline when it failed (ST-13), was rolled back automatically
// (EX-2, naming the failed revision) or was aborted and rolled back (EX-5, EX-6: the message names the cause); done with an error wrapping
// ErrInvalidPolicy, naming the annotation, its value and what it wants,
// while an invalid partition holds it (EX-1); not done while it progresses.
func (m *Model) Outcome() (done bool, err error) {
	d := m.Deployment
	switch m.Phase {
	case rolloutstate.PhaseComplete, rolloutstate.PhaseHeld:
		return true, nil
	case rolloutstate.PhaseInvalid:
		return true, fmt.Errorf("deployment %s/%s %w: %v; %s", d.Namespace, d.Name, ErrInvalidPolicy, m.Verdict.Invalid, m.Verdict.Invalid.Effect)
	case rolloutstate.PhaseFailed:
		return true, fmt.Errorf("deployment %s/%s %w", d.Namespace, d.Name, ErrDeadline)
	case rolloutstate.PhaseRolledBack:
		failed, _ := rolloutstate.AutoRolledBackFrom(d)
		if !rolloutstate.RolledBackOnDeadline(d, failed) {
			return true, &abortedError{fmt.Sprintf("deployment %s/%s: %s", d.Namespace, d.Name, rolloutstate.RolledBackMessage(d, failed))}
		}
		return true, fmt.Errorf("deployment %s/%s: revision %d %w and was rolled back automatically (%s)",
			d.Namespace, d.Name, failed, ErrDeadline, rolloutstate.RollbackOnProgressDeadlineAnnotation)
	}
	return false, nil
}

// abortedError is Outcome's error for a rollout that was aborted, by `kubedeploy rollout abort` (EX-5) or a failed
// analysis (EX-6), and rolled back: its message says which (rolloutstate.RolledBackMessage); it wraps ErrDeadline
// so that the watch exits 1 as for any rollout that did not go through.
type abortedError struct{ msg string }

func (e *abortedError) Error() string { return e.msg }
func (e *abortedError) Unwrap() error { return ErrDeadline }

// Ended is the last line of a watch that ended well: kubectl's "successfully
// rolled out", or "rollout held" with the Progressing message at a
// partition (EX-1).
func (m *Model) Ended() string {
	if m.Phase == rolloutstate.PhaseHeld {
		return fmt.Sprintf("deployment %q rollout %s", m.Deployment.Name, m.Verdict.Summary)
	}
	return fmt.Sprintf("deployment %q successfully rolled out", m.Deployment.Name)
}
