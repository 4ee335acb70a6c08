package viewmodel

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// SeenSlack is how long before a watch saw a ReplicaSet become the new one
// StartTracker takes the rollout to have begun: event times have whole
// seconds, and the Deployment and its events reach a watch through
// different watches.
const SeenSlack = time.Second

// RolloutStart returns when d's current rollout began (server time), as
// d and its ReplicaSets rss (any, in any order; those d does not control
// are left out) record it, and whether they record it exactly. The events
// `rollout watch` shows and the timeline it draws start there.
//
// The rollout's ReplicaSet is d's new one (RV-1), except during an
// automatic rollback's rollout (EX-2, rolloutstate.AutoRolledBackFrom),
// where it is the failed revision's: a watch follows a rollout and its
// automatic rollback as one, so the failed rollout's events and the
// rollback's (AutoRolledBack, the scaling back) show together.
//
// When that ReplicaSet was created for the rollout (it holds the highest
// revision, or the failed one, and has no revision-history annotation, RV-6)
// its creationTimestamp is the start, exactly: the controller creates it
// before it scales anything for the rollout. Otherwise (a rollback or
// `rollout undo` to an existing ReplicaSet, a template changed back, no
// ReplicaSet yet) nothing records when the rollout began: start is the
// newest creationTimestamp among d's ReplicaSets, a lower bound (a
// rollout that reuses a ReplicaSet began after every other one was
// created), and exact is false; StartTracker narrows it with what a
// watch saw. The zero time when d has no ReplicaSet.
//
// Why not the Progressing condition's lastTransitionTime: it is kept while
// the status stays True (ST-7), so a rollout started on a complete
// Deployment keeps the previous rollout's time, and it moves to the
// deadline when the rollout fails, hiding the rollout's first events. Why
// not the new ReplicaSet's creation alone: an automatic rollback's new
// ReplicaSet may be hours old, and the rollback's events would be buried
// under the older ones.
func RolloutStart(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (start time.Time, exact bool) {
	owned := rolloutstate.ControlledBy(rss, d.UID)
	if rs := rolloutReplicaSet(d, owned); rs != nil && createdFor(rs, owned, d) {
		return rs.CreationTimestamp.Time, true
	}
	for _, rs := range owned {
		if rs.CreationTimestamp.After(start) {
			start = rs.CreationTimestamp.Time
		}
	}
	return start, false
}

// rolloutReplicaSet returns the ReplicaSet of d's current rollout among
// owned (see RolloutStart), or nil.
func rolloutReplicaSet(d *appsv1.Deployment, owned []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	failed, ok := rolloutstate.AutoRolledBackFrom(d)
	if !ok {
		return rolloutstate.NewReplicaSet(d, owned)
	}
	for _, rs := range owned {
		if rs.Annotations[rolloutstate.RevisionAnnotation] == strconv.FormatInt(failed, 10) {
			return rs
		}
	}
	return nil
}

// createdFor reports whether rs, the ReplicaSet of d's current rollout,
// was created for it: it never held another revision, and it holds the
// highest revision of owned or, during an automatic rollback, the failed
// one (a reused ReplicaSet keeps its old revision until the controller
// bumps it).
func createdFor(rs *appsv1.ReplicaSet, owned []*appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	if rs.Annotations[rolloutstate.RevisionHistoryAnnotation] != "" {
		return false
	}
	if _, ok := rolloutstate.AutoRolledBackFrom(d); ok {
		return true
	}
	rev := revisionOf(rs)
	for _, o := range owned {
		if revisionOf(o) > rev {
			return false
		}
	}
	return true
}

// revisionOf returns rs's revision annotation as a number, -1 when it has
// none or it is not one.
func revisionOf(rs *appsv1.ReplicaSet) int64 {
	v, err := strconv.ParseInt(rs.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// StartTracker follows a Deployment's rollout start across the states one
// watch sees, in order (it is not safe for concurrent use). It knows what
// RolloutStart cannot: when a reused ReplicaSet became the new one, if the
// watch saw another one be new before. The zero value is ready.
type StartTracker struct {
	// observed is set after the first Observe; last is the new
	// ReplicaSet's UID then ("" for none).
	observed bool
	last     types.UID
	// seen is when a ReplicaSet was last seen becoming the new one, less
	// SeenSlack.
	seen map[types.UID]time.Time
}

// Observe takes d and its ReplicaSets rss as a watch saw them at at (the
// watch's clock) and returns the start of d's current rollout: RolloutStart's
// when exact, else the later of its bound and when this watch saw the
// rollout's ReplicaSet become the new one (less SeenSlack).
func (t *StartTracker) Observe(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, at time.Time) time.Time {
	owned := rolloutstate.ControlledBy(rss, d.UID)
	var uid types.UID
	if newRS := rolloutstate.NewReplicaSet(d, owned); newRS != nil {
		uid = newRS.UID
	}
	if t.observed && uid != t.last && uid != "" {
		if t.seen == nil {
			t.seen = map[types.UID]time.Time{}
		}
		t.seen[uid] = at.Add(-SeenSlack)
	}
	t.observed, t.last = true, uid
	start, exact := RolloutStart(d, owned)
	if exact {
		return start
	}
	if rs := rolloutReplicaSet(d, owned); rs != nil && t.seen[rs.UID].After(start) {
		return t.seen[rs.UID]
	}
	return start
}
