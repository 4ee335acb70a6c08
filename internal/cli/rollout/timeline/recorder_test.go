package timeline

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func recorderDeployment(strategy appsv1.DeploymentStrategyType) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Strategy: appsv1.DeploymentStrategy{Type: strategy}},
		Status:     appsv1.DeploymentStatus{Replicas: 4, AvailableReplicas: 4},
	}
	if strategy == appsv1.RollingUpdateDeploymentStrategyType {
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		}
	}
	return d
}

func recorderReplicaSet(d *appsv1.Deployment, name string, replicas int32, created time.Time) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(created),
			Annotations:     map[string]string{rolloutstate.RevisionAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Template: d.Spec.Template},
	}
}

func recorderEvent(uid types.UID, reason string, at time.Time, count int32, owner types.UID) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web." + string(uid), UID: uid},
		InvolvedObject: v1.ObjectReference{Kind: "Deployment", Name: "web", UID: owner},
		Type:           v1.EventTypeNormal, Reason: reason, LastTimestamp: metav1.NewTime(at), Count: count,
	}
}

// States are recorded from Synced on, once per distinct state, with the
// bounds of the Deployment (maxSurge 25% of 4 = 1, maxUnavailable 2); a
// state of another Deployment of the same name is not.
func TestRecorderStates(t *testing.T) {
	d := recorderDeployment(appsv1.RollingUpdateDeploymentStrategyType)
	r := NewRecorder(d)
	rs := recorderReplicaSet(d, "web-1", 4, t0)
	r.State(d, []*appsv1.ReplicaSet{rs}, t0) // before Synced: a half-filled cache
	r.Synced(nil)
	r.State(d, []*appsv1.ReplicaSet{rs}, t0.Add(time.Second))
	r.State(d, []*appsv1.ReplicaSet{rs}, t0.Add(2*time.Second)) // the same state
	other := d.DeepCopy()
	other.UID = "other"
	r.State(other, nil, t0.Add(3*time.Second))
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](3)
	r.State(d, []*appsv1.ReplicaSet{scaled}, t0.Add(4*time.Second))

	rec := r.Recording(t0.Add(5 * time.Second))
	if len(rec.Samples) != 2 || !rec.Samples[0].Time.Equal(t0.Add(time.Second)) || !rec.Samples[1].Time.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("samples %+v, want two: at 1s and 4s", rec.Samples)
	}
	if got := rec.Samples[1].ReplicaSets; len(got) != 1 || got[0].Replicas != 3 || got[0].Revision != "1" {
		t.Errorf("second sample's ReplicaSets %+v", got)
	}
	if rec.Replicas != 4 || rec.MaxTotal != 5 || rec.MinAvailable != 2 {
		t.Errorf("bounds: replicas %d, maxTotal %d, minAvailable %d; want 4, 5, 2", rec.Replicas, rec.MaxTotal, rec.MinAvailable)
	}
	if !rec.End.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("end %v", rec.End)
	}
	// The new ReplicaSet was created at t0, a second before the first
	// sample: the recording starts there.
	if !rec.Start.Equal(t0) {
		t.Errorf("start %v, want the new ReplicaSet's creation %v", rec.Start, t0)
	}

	recreate := recorderDeployment(appsv1.RecreateDeploymentStrategyType)
	r = NewRecorder(recreate)
	r.Synced(nil)
	r.State(recreate, nil, t0)
	if rec := r.Recording(t0); rec.MinAvailable != 0 {
		t.Errorf("Recreate draws a floor of %d available", rec.MinAvailable)
	}
}

// A rollout that started long before the watch is drawn from at most
// MaxLookBack before the first sample, and its older events are left out.
func TestRecorderLookBack(t *testing.T) {
	d := recorderDeployment(appsv1.RollingUpdateDeploymentStrategyType)
	r := NewRecorder(d)
	old := recorderEvent("e-old", "Old", t0.Add(-time.Hour), 1, "")
	recent := recorderEvent("e-recent", "Recent", t0.Add(-30*time.Second), 1, "")
	r.Event(old, t0)
	r.Event(recent, t0)
	r.Synced([]*v1.Event{old, recent})
	r.State(d, []*appsv1.ReplicaSet{recorderReplicaSet(d, "web-1", 4, t0.Add(-2*time.Hour))}, t0)
	rec := r.Recording(t0.Add(time.Second))
	if !rec.Start.Equal(t0.Add(-MaxLookBack)) {
		t.Errorf("start %v, want %v", rec.Start, t0.Add(-MaxLookBack))
	}
	if len(rec.Events) != 1 || rec.Events[0].Reason != "Recent" || !rec.Events[0].Time.Equal(recent.LastTimestamp.Time) {
		t.Errorf("events %+v, want only Recent at its own time", rec.Events)
	}
}

// Events listed before the watch keep their own times; one emitted while
// watching, or a listed one whose count goes up, is marked when it arrived
// (to the millisecond); the same count twice is one mark; another
// Deployment's events are ignored; the events come out in time order.
func TestRecorderEvents(t *testing.T) {
	d := recorderDeployment(appsv1.RollingUpdateDeploymentStrategyType)
	r := NewRecorder(d)
	listed := recorderEvent("e1", "Listed", t0.Add(-2*time.Second), 1, "d-uid")
	r.Event(listed, t0) // from the first list, before Synced
	r.Synced([]*v1.Event{listed})
	r.State(d, []*appsv1.ReplicaSet{recorderReplicaSet(d, "web-1", 4, t0.Add(-10*time.Second))}, t0)
	r.Event(listed, t0.Add(time.Second)) // the same count again
	arrived := t0.Add(1500 * time.Millisecond)
	r.Event(recorderEvent("e2", "New", t0.Add(time.Second), 1, ""), arrived)
	again := listed.DeepCopy()
	again.Count = 2
	r.Event(again, t0.Add(3*time.Second))
	r.Event(recorderEvent("e3", "Earlier", t0, 1, "earlier-uid"), t0.Add(4*time.Second))

	rec := r.Recording(t0.Add(5 * time.Second))
	var got []string
	for _, e := range rec.Events {
		got = append(got, e.Reason+"@"+e.Time.Sub(t0).String())
	}
	want := []string{"Listed@-2s", "New@1.5s", "Listed@3s"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("events %v, want %v", got, want)
			break
		}
	}
}

// A watch started 15 s before the change (issue 33): the recording starts
// when the new ReplicaSet was created, from the state the rollout started
// in, and an earlier rollout's events are left out; its automatic rollback
// to an hour-old ReplicaSet keeps that start.
func TestRecorderStartsAtTheRollout(t *testing.T) {
	d := recorderDeployment(appsv1.RollingUpdateDeploymentStrategyType)
	oldRS := recorderReplicaSet(d, "web-1", 4, t0.Add(-time.Hour))
	r := NewRecorder(d)
	earlier := recorderEvent("e-earlier", "Earlier", t0.Add(-50*time.Second), 1, "")
	r.Event(earlier, t0)
	r.Synced([]*v1.Event{earlier})
	r.State(d, []*appsv1.ReplicaSet{oldRS}, t0)

	changed := d.DeepCopy()
	changed.Spec.Template.Labels = map[string]string{"v": "2"}
	newRS := recorderReplicaSet(changed, "web-2", 1, t0.Add(15*time.Second))
	newRS.Annotations[rolloutstate.RevisionAnnotation] = "2"
	r.State(changed, []*appsv1.ReplicaSet{oldRS, newRS}, t0.Add(15200*time.Millisecond))
	r.Event(recorderEvent("e-up", "ScalingReplicaSet", t0.Add(15*time.Second), 1, ""), t0.Add(15300*time.Millisecond))

	rec := r.Recording(t0.Add(20 * time.Second))
	if !rec.Start.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("start %v, want the new ReplicaSet's creation %v", rec.Start, t0.Add(15*time.Second))
	}
	if len(rec.Samples) != 2 || !rec.Samples[0].Time.Equal(rec.Start) || len(rec.Samples[0].ReplicaSets) != 1 {
		t.Errorf("samples %+v, want the state before the rollout at its start, then the new one", rec.Samples)
	}
	if len(rec.Events) != 1 || rec.Events[0].Reason != "ScalingReplicaSet" {
		t.Errorf("events %+v, want only the rollout's", rec.Events)
	}

	// Revision 2 fails and is rolled back to web-1 (revision 3).
	rolledBack := d.DeepCopy()
	rolledBack.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3", rolloutstate.FailedRevisionAnnotation: "2"}
	target := oldRS.DeepCopy()
	target.Annotations[rolloutstate.RevisionAnnotation] = "3"
	target.Annotations[rolloutstate.RevisionHistoryAnnotation] = "1"
	r.State(rolledBack, []*appsv1.ReplicaSet{target, newRS}, t0.Add(50*time.Second))
	if rec := r.Recording(t0.Add(55 * time.Second)); !rec.Start.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("after the automatic rollback: start %v, want still %v", rec.Start, t0.Add(15*time.Second))
	}
}
