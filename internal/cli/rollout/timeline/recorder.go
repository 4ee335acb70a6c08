package timeline

import (
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// MaxLookBack is how far before the first sample a Recording may start: a
// watch usually starts just after the change that began the rollout, and
// the events of its first steps are drawn from the rollout's start, but not
// from an hour ago.
const MaxLookBack = time.Minute

// Recorder builds the Recording of one Deployment's rollout from what a
// watch sees, each object with the time it arrived. It is safe for
// concurrent use (a watch's informers call it from their handlers). It
// reads no clock: every time comes from the caller.
type Recorder struct {
	uid types.UID

	mu  sync.Mutex
	rec Recording
	// synced is set by Synced: states are recorded from then on (a
	// half-filled cache would draw a false start).
	synced bool
	// seen is the count last recorded per event UID: an aggregated event
	// is marked again each time its count goes up.
	seen map[types.UID]int32
	// listed is each event's count in the first list.
	listed map[types.UID]int32
	// start tracks when the current rollout began; rolloutStart is its
	// latest answer: the recording starts there, and events from before it
	// belong to earlier rollouts and are not drawn.
	start        viewmodel.StartTracker
	rolloutStart time.Time
	events       []v1.Event
}

// NewRecorder returns a Recorder for d (by UID: states and events of an
// earlier Deployment of the same name are ignored).
func NewRecorder(d *appsv1.Deployment) *Recorder {
	return &Recorder{
		uid:    d.UID,
		rec:    Recording{Namespace: d.Namespace, Deployment: d.Name},
		seen:   map[types.UID]int32{},
		listed: map[types.UID]int32{},
	}
}

// Synced says the watch has its first lists: events is the events listed
// then, which happened before the watch and keep their own (whole-second)
// times. The caller records the first state next.
func (r *Recorder) Synced(events []*v1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		r.listed[e.UID] = max(e.Count, 1)
	}
	r.synced = true
}

// State records a sample at at (the Deployment's available and total pods,
// every ReplicaSet of rss it controls, the bounds) when it differs from the
// last one. Before Synced, or for another Deployment, it does nothing.
func (r *Recorder) State(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, at time.Time) {
	if d == nil || d.UID != r.uid {
		return
	}
	s := Sample{Time: at, Available: d.Status.AvailableReplicas, Total: d.Status.Replicas}
	owned := rolloutstate.ControlledBy(rss, d.UID)
	for _, rs := range owned {
		s.ReplicaSets = append(s.ReplicaSets, ReplicaSet{
			Name:      rs.Name,
			Revision:  rs.Annotations[rolloutstate.RevisionAnnotation],
			Replicas:  rolloutstate.ReplicaSetReplicas(rs),
			Ready:     rs.Status.ReadyReplicas,
			Available: rs.Status.AvailableReplicas,
		})
	}
	slices.SortFunc(s.ReplicaSets, func(a, b ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	fp, _ := rolloutstate.FencepostsOf(d)
	maxTotal, minAvailable := fp.MaxTotal(), fp.MinAvailable()
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		// Recreate goes to 0 available by design: no floor to draw.
		minAvailable = 0
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.synced {
		return
	}
	if r.rec.Start.IsZero() {
		r.rec.Start = at
	}
	r.rec.Replicas = rolloutstate.Replicas(d)
	r.rec.MaxTotal, r.rec.MinAvailable = maxTotal, minAvailable
	r.rolloutStart = r.start.Observe(d, owned, at)
	if n := len(r.rec.Samples); n > 0 && sameState(r.rec.Samples[n-1], s) {
		return
	}
	r.rec.Samples = append(r.rec.Samples, s)
}

// sameState reports whether two samples show the same counts.
func sameState(a, b Sample) bool {
	return a.Available == b.Available && a.Total == b.Total && slices.Equal(a.ReplicaSets, b.ReplicaSets)
}

// Event records an event of the Deployment, once per count of an
// aggregated event: at at when it was emitted while watching (core/v1
// event times have whole seconds; at has the arrival's milliseconds), at
// its own time when it came with the first list. Events of another
// Deployment (by involvedObject.uid) are ignored.
func (r *Recorder) Event(e *v1.Event, at time.Time) {
	if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != r.uid {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	count := max(e.Count, 1)
	if r.seen[e.UID] >= count {
		return
	}
	r.seen[e.UID] = count
	rec := *e
	rec.LastTimestamp = metav1.NewTime(viewmodel.EventTime(*e))
	if r.synced && r.listed[e.UID] < count {
		rec.LastTimestamp = metav1.NewTime(at)
	}
	r.events = append(r.events, rec)
}

// Recording returns a copy of the timeline so far, ending at end. It starts
// when the current rollout began (viewmodel.StartTracker: an automatic
// rollback is part of the rollout it rolls back), but at most MaxLookBack
// before the first sample and at the latest at the last one: states from
// before the start are drawn as the one the rollout started from. It has
// the events from its start's second on (event times have whole seconds),
// in time order; events of earlier rollouts are left out.
func (r *Recorder) Recording(end time.Time) *Recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rec
	out.End = end
	out.Samples = slices.SortedStableFunc(slices.Values(out.Samples), func(a, b Sample) int { return a.Time.Compare(b.Time) })
	if n := len(out.Samples); n > 0 && !r.rolloutStart.IsZero() {
		out.Start = latest(r.rolloutStart, out.Samples[0].Time.Add(-MaxLookBack))
		if last := out.Samples[n-1].Time; out.Start.After(last) {
			out.Start = last
		}
		out.Samples = samplesFrom(out.Samples, out.Start)
	}
	evs := slices.Clone(r.events)
	slices.SortFunc(evs, viewmodel.CompareEvents)
	out.Events = nil
	for _, e := range evs {
		if at := e.LastTimestamp.Time; !at.Before(out.Start.Truncate(time.Second)) {
			out.Events = append(out.Events, Event{Time: at, Type: e.Type, Reason: e.Reason, Message: e.Message})
		}
	}
	return &out
}

// samplesFrom returns samples (in time order) from start on, the last one
// before start moved to start: the state the rollout started from.
func samplesFrom(samples []Sample, start time.Time) []Sample {
	i, _ := slices.BinarySearchFunc(samples, start, func(s Sample, t time.Time) int { return s.Time.Compare(t) })
	if i == 0 || (i < len(samples) && samples[i].Time.Equal(start)) {
		return samples[i:]
	}
	samples[i-1].Time = start
	return samples[i-1:]
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
