package rolloutmetrics

import (
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Outcome is how a rollout ended.
type Outcome string

// The outcomes of a rollout.
const (
	// Complete: the Deployment became complete with this new ReplicaSet (ST-9).
	Complete Outcome = "complete"
	// Failed: ProgressDeadlineExceeded (ST-13), with no automatic rollback to come (EX-2).
	Failed Outcome = "failed"
	// RolledBack: an older ReplicaSet became the new one before this one's rollout ended.
	RolledBack Outcome = "rolled_back"
	// Superseded: a newer template's ReplicaSet became the new one before this one's rollout ended.
	Superseded Outcome = "superseded"
)

// Rollout is one rollout in progress.
type Rollout struct {
	Namespace, Deployment string
	// ReplicaSet is the new ReplicaSet's name; Revision its revision annotation.
	ReplicaSet, Revision string
	// Start is when its ReplicaSet became the new one (as first seen; at start-up, for a rollout already in
	// progress, the ReplicaSet's creation).
	Start time.Time
	// Waited is the time spent waiting on each thing so far, up to the last observation; the current wait's
	// time since then is not in it.
	Waited map[WaitingOn]time.Duration
	// Wait is what it waits on now, since WaitSince.
	Wait      Wait
	WaitSince time.Time
	// Step is the current step of its kubedeploy.io/rollout-steps (EX-5), 1-based, as last observed; 0 without
	// steps (none, invalid, not for this rollout, or all done). PausedSince is when the pause step holding it
	// started, zero unless one holds it; PauseWaitsFor what ends that pause (StepWaitTime or StepWaitPromotion).
	Step          int
	PausedSince   time.Time
	PauseWaitsFor rolloutstate.StepWait

	rsUID    types.UID
	rsCreate time.Time
	// older are the UIDs of the Deployment's other ReplicaSets when the rollout started: one of them becoming
	// the new one is a rollback even when created in the same second (creationTimestamps have whole seconds).
	older map[types.UID]bool
	// template is the ReplicaSet's pod template (the cache's, read-only).
	template *v1.PodTemplateSpec
	observed time.Time
}

// Ended is a rollout that ended: the rollout as it last was, how, and when.
type Ended struct {
	Rollout
	Outcome Outcome
	End     time.Time
}

// Duration is how long the rollout ran, from Start to End.
func (e Ended) Duration() time.Duration { return e.End.Sub(e.Start) }

// Tracker follows the rollouts of every Deployment it is shown (Observe).
// It is safe for concurrent use; it reads no clock: every time comes from
// the caller.
type Tracker struct {
	// OnEnd, when set, is called with every rollout that ends, under the tracker's lock.
	OnEnd func(Ended)
	// OnForget, when set, is called with the namespace and name of every Deployment forgotten, under the
	// tracker's lock.
	OnForget func(namespace, name string)

	mu          sync.Mutex
	deployments map[types.UID]*tracked
}

// tracked is what the Tracker keeps of one Deployment.
type tracked struct {
	namespace, name string
	// newRS is the UID of the ReplicaSet last seen as the Deployment's new one ("" for none).
	newRS types.UID
	// rollout is that ReplicaSet's rollout while it is in progress.
	rollout *Rollout
	// lastSeen is the time of the last observation.
	lastSeen time.Time
	// analysis is what the metrics report of its analyses (EX-6), as of the last observation.
	analysis Analysis
}

// NewTracker returns a Tracker that follows no Deployment yet.
func NewTracker() *Tracker {
	return &Tracker{deployments: map[types.UID]*tracked{}}
}

// Observe shows the tracker d as it is at now, with rss (any ReplicaSets;
// those d does not control are left out) and pods (any pods; those of d's
// ReplicaSets are read). It starts, advances or ends d's rollout:
//   - a rollout in progress whose template d no longer has is replaced:
//     rolled back when d's new ReplicaSet is older than the rollout's
//     (created before it, or among d's ReplicaSets when it started),
//     else superseded;
//   - a ReplicaSet that becomes d's new one starts a rollout, from its
//     creation when it was created since the last observation, else (an
//     older ReplicaSet: a rollback) from now; on the first observation of
//     d (a restart) only a rollout in progress is followed, from its new
//     ReplicaSet's creation;
//   - a rollout ends complete when d is complete (ST-9), failed when d
//     exceeded its progress deadline with no automatic rollback to come;
//   - else the wait at now is noted (see Rollout.Waited);
//   - in every case d's analyses (EX-6) are noted for Analyses.
//
// No new ReplicaSet among rss (not created yet, or a cache behind) changes
// nothing.
func (t *Tracker) Observe(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*v1.Pod, now time.Time) {
	t.ObserveWith(d, rss, func(uid types.UID) []*v1.Pod { return rolloutstate.ControlledBy(pods, uid) }, now)
}

// PodsOf returns the pods the ReplicaSet with uid controls (the Feeder's: from the controller index).
type PodsOf func(uid types.UID) []*v1.Pod

// ObserveWith is Observe with d's pods read per ReplicaSet through podsOf, and only while a rollout is in
// progress (the Feeder reads them from the controller index, so no observation walks pods it does not need).
// Each observation compares d's pod template with its ReplicaSets' once (NewReplicaSet, then VerdictGiven); a
// rollout's own template is compared with d's only when its ReplicaSet is no longer d's new one (while it is,
// d has that template by definition).
func (t *Tracker) ObserveWith(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, podsOf PodsOf, now time.Time) {
	owned := rolloutstate.ControlledBy(rss, d.UID)
	newRS := rolloutstate.NewReplicaSet(d, owned)
	phase := rolloutstate.VerdictGiven(d, owned, newRS).Phase

	t.mu.Lock()
	defer t.mu.Unlock()
	st, seen := t.deployments[d.UID]
	if !seen {
		st = &tracked{namespace: d.Namespace, name: d.Name}
		t.deployments[d.UID] = st
	}
	defer func() { st.lastSeen, st.analysis = now, analysisOf(d, st.rollout != nil) }()
	if r := st.rollout; r != nil && (newRS == nil || newRS.UID != r.rsUID) && !rolloutstate.TemplatesEqualIgnoringHash(r.template, &d.Spec.Template) {
		outcome := Superseded
		if newRS != nil && (r.older[newRS.UID] || newRS.CreationTimestamp.Time.Before(r.rsCreate)) {
			outcome = RolledBack
		}
		t.end(st, outcome, now)
	}
	if newRS != nil && newRS.UID != st.newRS {
		st.newRS = newRS.UID
		if st.rollout != nil {
			t.end(st, Superseded, now) // another ReplicaSet of the same template
		}
		if seen || inProgress(phase) {
			st.rollout = newRollout(d, newRS, owned, startOf(newRS, seen, st.lastSeen, now))
		}
	}
	r := st.rollout
	if r == nil {
		return
	}
	switch phase {
	case rolloutstate.PhaseComplete, rolloutstate.PhaseRolledBack:
		t.end(st, Complete, now)
		return
	case rolloutstate.PhaseFailed:
		t.end(st, Failed, now)
		return
	}
	newPods := podsOf(r.rsUID)
	var oldPods []*v1.Pod
	for _, rs := range owned {
		if rs.UID != r.rsUID {
			oldPods = append(oldPods, podsOf(rs.UID)...)
		}
	}
	r.advance(waitOf(d, phase, newPods, oldPods, now), now)
	r.Step, r.PausedSince, r.PauseWaitsFor = stepOf(d, r.Revision, r.Wait.On == RolloutStep)
}

// stepOf returns the current step (1-based) of d's rollout steps recorded for revision, 0 for none, and, when
// held is set (a pause step holds the rollout), when that step started and what ends it.
func stepOf(d *appsv1.Deployment, revision string, held bool) (int, time.Time, rolloutstate.StepWait) {
	steps, st, ok := rolloutstate.RecordedStep(d, revision)
	if !ok {
		return 0, time.Time{}, rolloutstate.StepWaitNone
	}
	if s := steps[st.Step]; held && s.Pause != nil {
		return st.Step + 1, st.Since.Time, s.WaitsFor()
	}
	return st.Step + 1, time.Time{}, rolloutstate.StepWaitNone
}

// startOf is when newRS's rollout started, seen at now: its creation on
// the first observation of the Deployment or when it was created since the
// last one (lastSeen; creationTimestamps have whole seconds), else now.
func startOf(newRS *appsv1.ReplicaSet, seen bool, lastSeen, now time.Time) time.Time {
	created := newRS.CreationTimestamp.Time
	if (!seen || !created.Before(lastSeen.Truncate(time.Second))) && created.Before(now) {
		return created
	}
	return now
}

// newRollout is newRS's rollout from start; owned are d's ReplicaSets then.
func newRollout(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, owned []*appsv1.ReplicaSet, start time.Time) *Rollout {
	older := map[types.UID]bool{}
	for _, rs := range owned {
		if rs.UID != newRS.UID {
			older[rs.UID] = true
		}
	}
	return &Rollout{
		Namespace: d.Namespace, Deployment: d.Name, ReplicaSet: newRS.Name,
		Revision: newRS.Annotations[rolloutstate.RevisionAnnotation],
		Start:    start, Waited: map[WaitingOn]time.Duration{}, WaitSince: start, observed: start,
		rsUID: newRS.UID, rsCreate: newRS.CreationTimestamp.Time, template: &newRS.Spec.Template, older: older,
	}
}

// inProgress reports whether a rollout in phase has yet to end.
func inProgress(phase rolloutstate.Phase) bool {
	return phase == rolloutstate.PhaseProgressing || phase == rolloutstate.PhaseHeld || phase == rolloutstate.PhaseInvalid
}

// advance counts the time since the last observation to the wait then, and
// takes w as the wait from now on. The time before a rollout's first
// observation counts to its first wait.
func (r *Rollout) advance(w Wait, now time.Time) {
	if r.Wait.On == "" {
		r.Wait = w
	}
	if now.After(r.observed) {
		r.Waited[r.Wait.On] += now.Sub(r.observed)
		r.observed = now
	}
	if w != r.Wait {
		r.Wait, r.WaitSince = w, now
	}
}

// end ends st's rollout with outcome at now (t.mu held).
func (t *Tracker) end(st *tracked, outcome Outcome, now time.Time) {
	r := st.rollout
	st.rollout = nil
	r.advance(r.Wait, now)
	if t.OnEnd != nil {
		t.OnEnd(Ended{Rollout: *r, Outcome: outcome, End: now})
	}
}

// Forget drops the Deployment with uid (deleted): its rollout in progress,
// if any, ends without an outcome and is not reported.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.deployments[uid]
	if !ok {
		return
	}
	delete(t.deployments, uid)
	if t.OnForget != nil {
		t.OnForget(st.namespace, st.name)
	}
}

// InProgress returns a copy of every rollout in progress, its Waited
// brought up to now (the current wait's time included).
func (t *Tracker) InProgress(now time.Time) []Rollout {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Rollout
	for _, st := range t.deployments {
		if st.rollout == nil {
			continue
		}
		r := *st.rollout
		r.Waited = maps.Clone(r.Waited)
		if now.After(r.observed) {
			r.Waited[r.Wait.On] += now.Sub(r.observed)
		}
		out = append(out, r)
	}
	return out
}

// Analyses returns what the metrics report of the analyses (EX-6) of every Deployment it follows that has some,
// as of its last observation (analysisOf): the measurements of its current revision's analysis runs, and the
// runs that hold its rollout in progress.
func (t *Tracker) Analyses() []Analysis {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Analysis
	for _, st := range t.deployments {
		if !st.analysis.empty() {
			out = append(out, st.analysis)
		}
	}
	return out
}
