package deployment

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// podsOf returns live and terminating pods controlled by rs (and finished
// ones, which never count).
func podsOf(rs *appsv1.ReplicaSet, live, terminating, finished int) []*v1.Pod {
	var out []*v1.Pod
	mk := func(i int, deleting bool, phase v1.PodPhase) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", rs.Name, i), UID: types.UID(fmt.Sprintf("%s-p%d", rs.Name, i)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Status: v1.PodStatus{Phase: phase}}
		if deleting {
			now := metav1.NewTime(baseTime)
			p.DeletionTimestamp = &now
		}
		return p
	}
	i := 0
	for range live {
		out = append(out, mk(i, false, v1.PodRunning))
		i++
	}
	for range terminating {
		out = append(out, mk(i, true, v1.PodRunning))
		i++
	}
	for range finished {
		out = append(out, mk(i, false, v1.PodSucceeded))
		i++
	}
	return out
}

// TestPodFootprint: a ReplicaSet counts the most pods it can hold (EX-3).
func TestPodFootprint(t *testing.T) {
	d := newDeployment(10, intstr.FromInt32(3), intstr.FromInt32(0))
	cases := []struct {
		name                        string
		spec, statusReplicas        int32
		statusTerminating           *int32
		live, terminating, finished int
		pending                     int
		want                        int64
	}{
		{name: "settled", spec: 5, statusReplicas: 5, live: 5, want: 5},
		{name: "scaled up, pods not created yet: spec counts", spec: 8, statusReplicas: 5, live: 5, want: 8},
		{name: "scaled down, pods not deleted yet: live counts", spec: 2, statusReplicas: 5, live: 5, want: 5},
		{name: "terminating pods count until gone", spec: 2, statusReplicas: 2, live: 2, terminating: 3, want: 5},
		{name: "status terminating counts when the cache has not seen them", spec: 2, statusReplicas: 2, live: 2, statusTerminating: ptr.To[int32](3), want: 5},
		{name: "lagging cache: status replicas counts", spec: 2, statusReplicas: 6, live: 2, want: 6},
		{name: "finished pods never count", spec: 2, statusReplicas: 2, live: 2, finished: 4, want: 2},
		{name: "lowered while creates are in flight: they count", spec: 3, statusReplicas: 3, live: 3, pending: 2, want: 5},
		{name: "in-flight creates within spec add nothing", spec: 5, statusReplicas: 3, live: 3, pending: 2, want: 5},
		{name: "in-flight creates and terminating pods", spec: 3, statusReplicas: 3, live: 3, pending: 2, terminating: 1, want: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS(d, "a", "nginx:1", tc.spec, 0, nil)
			rs.Status.Replicas, rs.Status.TerminatingReplicas = tc.statusReplicas, tc.statusTerminating
			if got := podFootprint(rs, podsOf(rs, tc.live, tc.terminating, tc.finished), tc.pending); got != tc.want {
				t.Errorf("footprint = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSyncTerminationCompleteWaitsForTerminatingPods (EX-3, IM-7): 10
// replicas, maxSurge 3, maxUnavailable 0, mid-rollout: old A scaled to 7
// with 3 of its pods still terminating, new B at 3 and available. RU-10
// alone grows B to 6 (Σ spec 13), which with the terminating pods makes 16
// pods. With TerminationComplete B waits until the pods are gone; without
// the annotation the behaviour is upstream's.
func TestSyncTerminationCompleteWaitsForTerminatingPods(t *testing.T) {
	setup := func(t *testing.T, policy string) (*fixture, string) {
		d := newDeployment(10, intstr.FromInt32(3), intstr.FromInt32(0))
		d.Spec.Template = podTemplate("nginx:2")
		d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2"}
		if policy != "" {
			d.Annotations[rolloutstate.PodReplacementPolicyAnnotation] = policy
		}
		b := "nginx-" + computeHash(&d.Spec.Template, nil)
		oldA := withStatus(newRS(d, "nginx-a", "nginx:1", 7, 0, sizeAnnotations(10, 13, 1)), 7, 7)
		oldA.Status.TerminatingReplicas = ptr.To[int32](3)
		newB := withStatus(newRS(d, b, "nginx:2", 3, 1, sizeAnnotations(10, 13, 2)), 3, 3)
		objs := []runtimeObject{d, oldA, newB}
		for _, p := range append(podsOf(oldA, 7, 3, 0), podsOf(newB, 3, 0, 0)...) {
			objs = append(objs, p)
		}
		return newFixture(t, objs...), b
	}
	t.Run("TerminationComplete waits", func(t *testing.T) {
		f, b := setup(t, rolloutstate.PodReplacementTerminationComplete)
		if _, err := f.sync(); err != nil {
			t.Fatal(err)
		}
		if got := *f.rs(b).Spec.Replicas; got != 3 {
			t.Fatalf("new ReplicaSet = %d, want 3 while 3 old pods terminate (7+3+3 = 13 pods)", got)
		}
		// The terminating pods are gone: B may grow by 3.
		for _, p := range podsOf(f.rs("nginx-a"), 7, 3, 0)[7:] {
			if err := f.Factory.Core().V1().Pods().Informer().GetIndexer().Delete(p); err != nil {
				t.Fatal(err)
			}
		}
		f.setRSStatus("nginx-a", 7, 7)
		a := f.rs("nginx-a")
		a.Status.TerminatingReplicas = ptr.To[int32](0)
		f.AddToCache(a)
		f.observe()
		if _, err := f.sync(); err != nil {
			t.Fatal(err)
		}
		if got := *f.rs(b).Spec.Replicas; got != 6 {
			t.Fatalf("new ReplicaSet = %d after the terminating pods went, want 6", got)
		}
	})
	for _, tc := range []struct{ name, policy string }{
		{"without the annotation: upstream", ""},
		{"another value: upstream", "TerminationStarted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, b := setup(t, tc.policy)
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			if got := *f.rs(b).Spec.Replicas; got != 6 {
				t.Fatalf("new ReplicaSet = %d, want 6 (RU-10 on specs only)", got)
			}
		})
	}
}

// TestSyncTerminationCompleteCountsCreationsInFlight (EX-3, issue 35): 6
// replicas, maxSurge 2, maxUnavailable 0. Old A was just lowered from 5 to 3
// while its ReplicaSet controller still had 2 creations in flight (3 pods
// in the cache); new B has 3. By the caches alone 3 + 3 = 6 pods leave B room
// for 2; the 2 creations then land and the namespace holds 10 pods (8
// allowed). Counting the ReplicaSet controller's pending creations, B waits;
// once they are observed (and A's extra pods deleted), it grows.
func TestSyncTerminationCompleteCountsCreationsInFlight(t *testing.T) {
	d := newDeployment(6, intstr.FromInt32(2), intstr.FromInt32(0))
	d.Spec.Template = podTemplate("nginx:2")
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2", rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
	b := "nginx-" + computeHash(&d.Spec.Template, nil)
	oldA := withStatus(newRS(d, "nginx-a", "nginx:1", 3, 0, sizeAnnotations(6, 8, 1)), 3, 3)
	newB := withStatus(newRS(d, b, "nginx:2", 3, 1, sizeAnnotations(6, 8, 2)), 3, 3)
	objs := []runtimeObject{d, oldA, newB}
	for _, p := range append(podsOf(oldA, 3, 0, 0), podsOf(newB, 3, 0, 0)...) {
		objs = append(objs, p)
	}
	f := newFixture(t, objs...)
	pending := map[string]int{"nginx-a": 2}
	var asked []string
	f.c.pendingCreations = func(namespace, name string) int {
		asked = append(asked, namespace+"/"+name)
		return pending[name]
	}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := *f.rs(b).Spec.Replicas; got != 3 {
		t.Fatalf("new ReplicaSet = %d, want 3 while 2 of A's creations are in flight (3+2+3 = 8 pods)", got)
	}
	if len(asked) == 0 {
		t.Fatal("the ReplicaSet controller's pending creations were never read")
	}
	// The creations were observed and A's 2 extra pods deleted and gone: B may grow by 2.
	pending = nil
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := *f.rs(b).Spec.Replicas; got != 5 {
		t.Fatalf("new ReplicaSet = %d once nothing is in flight, want 5 (3 + 3 + 2 surge)", got)
	}
}
