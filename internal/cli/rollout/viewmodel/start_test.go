package viewmodel

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// created returns rs with its creationTimestamp at and, when history is
// not empty, the revision-history annotation of a reused ReplicaSet.
func created(rs *appsv1.ReplicaSet, at time.Time, history string) *appsv1.ReplicaSet {
	rs.CreationTimestamp = metav1.NewTime(at)
	if history != "" {
		rs.Annotations[rolloutstate.RevisionHistoryAnnotation] = history
	}
	return rs
}

// rolloutStartCase is a case of TestRolloutStart: RolloutStart(d, rss) is
// want, exactly or not.
type rolloutStartCase struct {
	name  string
	d     *appsv1.Deployment
	rss   []*appsv1.ReplicaSet
	want  time.Time
	exact bool
}

// What the objects say about when the rollout began: exactly for a
// ReplicaSet created for it, a lower bound for a reused one.
func TestRolloutStart(t *testing.T) {
	for _, tc := range rolloutStartCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, exact := RolloutStart(tc.d, tc.rss)
			if !got.Equal(tc.want) || exact != tc.exact {
				t.Errorf("RolloutStart = %v, exact %v; want %v, exact %v", got, exact, tc.want, tc.exact)
			}
		})
	}
}

func rolloutStartCases() []rolloutStartCase {
	d := deployment("nginx:2", appsv1.DeploymentStatus{}, progressing)
	rolledBack := d.DeepCopy()
	rolledBack.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3", rolloutstate.FailedRevisionAnnotation: "2"}
	rolledBack.Spec.Template = template("nginx:1")
	stranger := created(replicaSet(d, "other", "7", "nginx:2", 1, 1), now, "")
	stranger.OwnerReferences = controllerRef("Deployment", "other", "other-uid")
	return []rolloutStartCase{{
		name: "a new ReplicaSet created for the rollout: its creation",
		d:    d,
		rss: []*appsv1.ReplicaSet{
			created(replicaSet(d, "web-old", "1", "nginx:1", 3, 3), now.Add(-time.Hour), ""),
			created(replicaSet(d, "web-new", "2", "nginx:2", 1, 0), now.Add(-10*time.Second), ""),
			stranger,
		},
		want: now.Add(-10 * time.Second), exact: true,
	}, {
		name: "a reused ReplicaSet (rollout undo, a template changed back): the newest creation, a bound",
		d:    d,
		rss: []*appsv1.ReplicaSet{
			created(replicaSet(d, "web-new", "3", "nginx:2", 1, 0), now.Add(-time.Hour), "1"),
			created(replicaSet(d, "web-mid", "2", "nginx:3", 3, 3), now.Add(-20*time.Minute), ""),
			stranger,
		},
		want: now.Add(-20 * time.Minute),
	}, {
		name: "a reused ReplicaSet before its revision is bumped: not taken as created for the rollout",
		d:    d,
		rss: []*appsv1.ReplicaSet{
			created(replicaSet(d, "web-new", "1", "nginx:2", 0, 0), now.Add(-time.Hour), ""),
			created(replicaSet(d, "web-mid", "2", "nginx:3", 4, 4), now.Add(-20*time.Minute), ""),
		},
		want: now.Add(-20 * time.Minute),
	}, {
		name: "an automatic rollback (EX-2): the failed revision's rollout, which it is part of",
		d:    rolledBack,
		rss: []*appsv1.ReplicaSet{
			created(replicaSet(d, "web-old", "3", "nginx:1", 4, 2), now.Add(-time.Hour), "1"),
			created(replicaSet(d, "web-failed", "2", "nginx:2", 0, 0), now.Add(-40*time.Second), ""),
		},
		want: now.Add(-40 * time.Second), exact: true,
	}, {
		name: "no ReplicaSet for the template yet: the newest creation, a bound",
		d:    deployment("nginx:9", appsv1.DeploymentStatus{}),
		rss:  []*appsv1.ReplicaSet{created(replicaSet(d, "web-old", "1", "nginx:1", 4, 4), now.Add(-time.Hour), "")},
		want: now.Add(-time.Hour),
	}, {
		name: "no ReplicaSet at all: the zero time",
		d:    d,
	}}
}

// A watch that saw another ReplicaSet be new knows when a reused one became
// new again (SeenSlack before); an exact start is kept; an automatic
// rollback does not restart the rollout it is part of.
func TestStartTracker(t *testing.T) {
	// nginx:1 (revision 1), nginx:2 (2), back to nginx:1: web-v1 holds
	// revision 3.
	d := deployment("nginx:1", appsv1.DeploymentStatus{}, complete)
	v1RS := created(replicaSet(d, "web-v1", "3", "nginx:1", 4, 4), now.Add(-2*time.Hour), "1")
	v2RS := created(replicaSet(d, "web-v2", "2", "nginx:2", 0, 0), now.Add(-time.Hour), "")
	var tr StartTracker
	if got := tr.Observe(d, []*appsv1.ReplicaSet{v1RS, v2RS}, now); !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("first look at a reused ReplicaSet: %v, want the newest creation %v", got, now.Add(-time.Hour))
	}

	// The template is changed back to nginx:2: web-v2 is new again, then
	// bumped to revision 4.
	undo := d.DeepCopy()
	undo.Spec.Template = template("nginx:2")
	seen := now.Add(90 * time.Second)
	if got := tr.Observe(undo, []*appsv1.ReplicaSet{v1RS, v2RS}, seen); !got.Equal(seen.Add(-SeenSlack)) {
		t.Errorf("reused ReplicaSet seen becoming new: %v, want %v", got, seen.Add(-SeenSlack))
	}
	bumped := v2RS.DeepCopy()
	bumped.Annotations[rolloutstate.RevisionAnnotation] = "4"
	bumped.Annotations[rolloutstate.RevisionHistoryAnnotation] = "2"
	if got := tr.Observe(undo, []*appsv1.ReplicaSet{v1RS, bumped}, seen.Add(5*time.Second)); !got.Equal(seen.Add(-SeenSlack)) {
		t.Errorf("later look: %v, want it kept at %v", got, seen.Add(-SeenSlack))
	}

	// A fresh template: its ReplicaSet's creation, exactly.
	fresh := d.DeepCopy()
	fresh.Spec.Template = template("nginx:broken")
	v5RS := created(replicaSet(d, "web-v5", "5", "nginx:broken", 1, 0), seen.Add(58*time.Second), "")
	if got := tr.Observe(fresh, []*appsv1.ReplicaSet{v1RS, bumped, v5RS}, seen.Add(time.Minute)); !got.Equal(v5RS.CreationTimestamp.Time) {
		t.Errorf("fresh ReplicaSet: %v, want its creation %v", got, v5RS.CreationTimestamp.Time)
	}

	// Revision 5 fails and is rolled back to web-v2 (revision 6): the
	// rollout is still revision 5's.
	rolledBack := undo.DeepCopy()
	rolledBack.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "6", rolloutstate.FailedRevisionAnnotation: "5"}
	target := bumped.DeepCopy()
	target.Annotations[rolloutstate.RevisionAnnotation] = "6"
	target.Annotations[rolloutstate.RevisionHistoryAnnotation] = "2,4"
	if got := tr.Observe(rolledBack, []*appsv1.ReplicaSet{v1RS, target, v5RS}, seen.Add(2*time.Minute)); !got.Equal(v5RS.CreationTimestamp.Time) {
		t.Errorf("automatic rollback: %v, want the failed rollout's start %v", got, v5RS.CreationTimestamp.Time)
	}
}

// Build shows only the events of the current rollout: from its start's
// second on (event times have whole seconds), during an automatic rollback
// the failed rollout's and the rollback's.
func TestEventsOfTheRollout(t *testing.T) {
	d := deployment("nginx:2", appsv1.DeploymentStatus{}, progressing)
	newRS := created(replicaSet(d, "web-new", "2", "nginx:2", 1, 0), now.Add(-10*time.Second+300*time.Millisecond), "")
	oldRS := created(replicaSet(d, "web-old", "1", "nginx:1", 3, 3), now.Add(-time.Hour), "")
	events := []*v1.Event{
		event("web.1", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set web-old from 0 to 4", now.Add(-time.Hour), ""),
		event("web.2", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled down replica set web-older from 1 to 0", now.Add(-11*time.Second), ""),
		event("web.3", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set web-new from 0 to 1", now.Add(-10*time.Second), ""),
	}
	in := Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{oldRS, newRS}, Events: events, MaxEvents: 3}
	if got := eventNames(Build(in, now)); got != "web.3" {
		t.Errorf("events %s, want only web.3 (the new ReplicaSet was created in its second)", got)
	}
	in.RolloutStart = now.Add(-2 * time.Hour)
	if got := eventNames(Build(in, now)); got != "web.1 web.2 web.3" {
		t.Errorf("with an earlier RolloutStart given: events %s, want all three", got)
	}

	// Rolled back automatically from revision 2 to web-old (revision 3).
	rb := d.DeepCopy()
	rb.Spec.Template = template("nginx:1")
	rb.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3", rolloutstate.FailedRevisionAnnotation: "2"}
	reused := created(replicaSet(d, "web-old", "3", "nginx:1", 4, 3), now.Add(-time.Hour), "1")
	failed := newRS.DeepCopy()
	failed.Spec.Replicas = ptr.To[int32](0)
	rbEvents := append(events[:3:3],
		event("web.4", v1.EventTypeWarning, "AutoRolledBack", "Rolled back deployment \"web\" from revision 2", now.Add(-2*time.Second), ""),
		event("web.5", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set web-old from 3 to 4", now.Add(-time.Second), ""))
	in = Input{Deployment: rb, ReplicaSets: []*appsv1.ReplicaSet{reused, failed}, Events: rbEvents, MaxEvents: 5}
	if got := eventNames(Build(in, now)); got != "web.3 web.4 web.5" {
		t.Errorf("automatic rollback: events %s, want the failed rollout's and the rollback's (web.3 web.4 web.5)", got)
	}
}

// eventNames returns the names of m's events, space-separated.
func eventNames(m *Model) string {
	var names []string
	for _, e := range m.Events {
		names = append(names, e.Name)
	}
	return strings.Join(names, " ")
}
