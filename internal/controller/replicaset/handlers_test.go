package replicaset

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestHandlers covers EH-9..EH-12: what each event enqueues and observes.
func TestHandlers(t *testing.T) {
	rs := testRS(3)
	rs.Spec.MinReadySeconds = 5
	db := testRS(1)
	db.Name, db.UID = "db", "db-uid"
	db.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	emptySel := testRS(1)
	emptySel.Name, emptySel.UID = "empty", "empty-uid"
	emptySel.Spec.Selector = &metav1.LabelSelector{}

	testHandlersPodAdd(t, rs, db, emptySel)
	testHandlersPodUpdate(t, rs)
	testHandlersReplicaSet(t, rs)
}

// testHandlersPodAdd holds TestHandlers' EH-10 and first EH-11 subtests.
func testHandlersPodAdd(t *testing.T, rs, db, emptySel *appsv1.ReplicaSet) {
	t.Helper()
	t.Run("EH-10 owned pod add observes a creation", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.expectations.ExpectCreations(klogFor(f), "ns/rs", 1)
		f.c.onPodAdd(klogFor(f), newPod("p", ownedBy(rs), webLabels))
		if add, _, _ := f.c.expectations.Pending("ns/rs"); add != 0 || f.c.runner.Len() != 1 {
			t.Errorf("add = %d, queue = %d; want 0, 1", add, f.c.runner.Len())
		}
	})
	t.Run("EH-10 pod owned by an unknown kind is ignored", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.onPodAdd(klogFor(f), newPod("p", webLabels, func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
		}))
		if f.c.runner.Len() != 0 {
			t.Error("a pod controlled by another kind must not enqueue")
		}
	})
	t.Run("EH-10 pod whose ControllerRef names a ReplicaSet of another group is ignored", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.expectations.ExpectCreations(klogFor(f), "ns/rs", 1)
		f.c.onPodAdd(klogFor(f), newPod("p", webLabels, func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
		}))
		if add, _, _ := f.c.expectations.Pending("ns/rs"); add != 1 || f.c.runner.Len() != 0 {
			t.Errorf("add = %d, queue = %d; want 1 (no creation observed), 0", add, f.c.runner.Len())
		}
	})
	t.Run("EH-10 orphan add enqueues matching non-empty selectors only", func(t *testing.T) {
		f := newFixture(t, rs, db, emptySel)
		f.c.onPodAdd(klogFor(f), newPod("p", webLabels))
		if f.c.runner.Len() != 1 {
			t.Errorf("queue = %d, want 1 (only rs)", f.c.runner.Len())
		}
	})
	t.Run("EH-11 not-Ready to Ready enqueues now and after minReadySeconds", func(t *testing.T) {
		f := newFixture(t, rs)
		old := newPod("p", ownedBy(rs), webLabels, rv("1"))
		cur := newPod("p", ownedBy(rs), webLabels, rv("2"), readySince(testNow))
		f.c.onPodUpdate(klogFor(f), old, cur)
		if f.c.runner.Len() != 1 {
			t.Errorf("queue = %d, want 1", f.c.runner.Len())
		}
	})
}

// testHandlersPodUpdate holds TestHandlers' issue 11 and remaining EH-11 subtests.
func testHandlersPodUpdate(t *testing.T, rs *appsv1.ReplicaSet) {
	t.Helper()
	t.Run("issue 11: with a status window, pods turning Ready are reported together a window after the first", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.cfg.StatusSyncWindow = 100 * time.Millisecond
		for _, name := range []string{"p1", "p2", "p3"} {
			old := newPod(name, ownedBy(rs), webLabels, rv("1"))
			cur := newPod(name, ownedBy(rs), webLabels, rv("2"), readySince(testNow))
			f.c.onPodUpdate(klogFor(f), old, cur)
		}
		// The fake clock times the queue and has not moved: a key queued at
		// once would be here, a delayed one cannot be due. How long the
		// window lasts is the runner's (TestEnqueueCoalesced records it).
		if n := f.c.runner.Len(); n != 0 {
			t.Fatalf("queue = %d within the window, want 0 (reported a window later)", n)
		}
		f.Clock.Step(100 * time.Millisecond)
		// One sync for the three pods (minReadySeconds' own wake-up is 5 s away). The delaying queue moves a due
		// key on its own goroutine: wait for it (a bound, not a measurement).
		for deadline := time.Now().Add(5 * time.Second); f.c.runner.Len() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n := f.c.runner.Len(); n != 1 {
			t.Errorf("queue = %d after the window, want 1", n)
		}
	})
	t.Run("EH-11 resync with the same resourceVersion is ignored", func(t *testing.T) {
		f := newFixture(t, rs)
		p := newPod("p", ownedBy(rs), webLabels, rv("1"))
		f.c.onPodUpdate(klogFor(f), p, p)
		if f.c.runner.Len() != 0 {
			t.Error("an unchanged pod must not enqueue")
		}
	})
	t.Run("EH-11 deletionTimestamp observes the expected deletion", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.expectations.ExpectDeletions(klogFor(f), "ns/rs", []string{"ns/p"})
		old := newPod("p", ownedBy(rs), webLabels, rv("1"))
		cur := old.DeepCopy()
		cur.ResourceVersion, cur.DeletionTimestamp = "2", &metav1.Time{Time: testNow}
		f.c.onPodUpdate(klogFor(f), old, cur)
		if _, del, _ := f.c.expectations.Pending("ns/rs"); del != 0 {
			t.Errorf("del = %d, want 0", del)
		}
	})
}

// testHandlersReplicaSet holds TestHandlers' EH-9 subtests.
func testHandlersReplicaSet(t *testing.T, rs *appsv1.ReplicaSet) {
	t.Helper()
	t.Run("EH-9 RS recreated with a new UID drops old expectations", func(t *testing.T) {
		f := newFixture(t, rs)
		f.c.expectations.ExpectCreations(klogFor(f), "ns/rs", 3)
		recreated := rs.DeepCopy()
		recreated.UID = "new-uid"
		f.c.onReplicaSetUpdate(klogFor(f), rs, recreated)
		if _, _, ok := f.c.expectations.Pending("ns/rs"); ok || f.c.runner.Len() != 1 {
			t.Errorf("expectations kept = %v, queue = %d; want false, 1", ok, f.c.runner.Len())
		}
	})
	t.Run("EH-9 RS delete tombstone clears expectations", func(t *testing.T) {
		f := newFixture(t)
		f.c.expectations.ExpectCreations(klogFor(f), "ns/rs", 3)
		f.c.onReplicaSetDelete(klogFor(f), cache.DeletedFinalStateUnknown{Key: "ns/rs", Obj: rs})
		f.c.onReplicaSetDelete(klogFor(f), "garbage") // never crashes
		if _, _, ok := f.c.expectations.Pending("ns/rs"); ok {
			t.Error("expectations kept after delete")
		}
	})
}
