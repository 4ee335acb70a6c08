package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

var nginxKey = cache.ObjectName{Namespace: "ns", Name: "nginx"}

func TestReplicaSetHandlersEH2toEH5(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	logger := klog.Background()
	owned := newRS(d, "owned", "x", 1, 0, nil)
	orphan := newRS(d, "orphan", "x", 1, 0, nil)
	orphan.OwnerReferences = nil
	foreign := newRS(d, "foreign", "x", 1, 0, nil)
	foreign.OwnerReferences[0].UID = "other"
	otherGroup := newRS(d, "other-group", "x", 1, 0, nil)
	otherGroup.OwnerReferences[0].APIVersion = "example.com/v1" // a custom Deployment kind borrowing our name and UID

	for _, tc := range []struct {
		name string
		do   func(f *fixture)
		want int
	}{
		{"EH-2 add owned", func(f *fixture) { f.c.onReplicaSetAdd(logger, owned) }, 1},
		{"EH-2 add orphan enqueues matching", func(f *fixture) { f.c.onReplicaSetAdd(logger, orphan) }, 1},
		{"EH-2 orphan without labels matches none", func(f *fixture) {
			o := orphan.DeepCopy()
			o.Labels = nil
			f.c.onReplicaSetAdd(logger, o)
		}, 0},
		{"EH-5 UID mismatch ignored", func(f *fixture) { f.c.onReplicaSetAdd(logger, foreign) }, 0},
		{"EH-5 a ControllerRef of another group ignored, not an orphan either", func(f *fixture) { f.c.onReplicaSetAdd(logger, otherGroup) }, 0},
		{"EH-3 resync ignored", func(f *fixture) { f.c.onReplicaSetUpdate(logger, owned, owned.DeepCopy()) }, 0},
		{"EH-3 update owned", func(f *fixture) {
			cur := owned.DeepCopy()
			cur.ResourceVersion = "11"
			f.c.onReplicaSetUpdate(logger, owned, cur)
		}, 1},
		{"EH-4 delete tombstone", func(f *fixture) {
			f.c.onReplicaSetDelete(logger, cache.DeletedFinalStateUnknown{Key: "ns/owned", Obj: owned})
		}, 1},
		{"EH-4 delete orphan ignored", func(f *fixture) { f.c.onReplicaSetDelete(logger, orphan) }, 0},
		{"unexpected type ignored", func(f *fixture) { f.c.onReplicaSetDelete(logger, "junk") }, 0},
		{"EH-1 deployment delete tombstone", func(f *fixture) {
			f.c.onDeployment(logger, cache.DeletedFinalStateUnknown{Key: "ns/nginx", Obj: d})
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, d)
			tc.do(f)
			got := f.enqueued()
			if len(got) != tc.want {
				t.Fatalf("enqueued %v, want %d keys", got, tc.want)
			}
			for _, k := range got {
				if k != nginxKey {
					t.Errorf("enqueued %v", k)
				}
			}
		})
	}
	t.Run("EH-3 released: old owner enqueued, then matching", func(t *testing.T) {
		checkReleasedReplicaSetEnqueuesOldOwnerThenMatching(t, d, owned)
	})
}

// checkReleasedReplicaSetEnqueuesOldOwnerThenMatching (EH-3): a ReplicaSet
// released by its owner enqueues the old owner, then the matching Deployment.
func checkReleasedReplicaSetEnqueuesOldOwnerThenMatching(t *testing.T, d *appsv1.Deployment, owned *appsv1.ReplicaSet) {
	t.Helper()
	logger := klog.Background()
	other := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	other.Name, other.UID = "other", "other-uid"
	f := newFixture(t, d, other)
	cur := owned.DeepCopy()
	cur.ResourceVersion = "11"
	cur.OwnerReferences = nil
	f.c.onReplicaSetUpdate(logger, owned, cur)
	got := f.enqueued()
	if len(got) != 2 || got[0] != nginxKey || got[1] != (cache.ObjectName{Namespace: "ns", Name: "other"}) {
		t.Errorf("enqueued %v, want ns/nginx (old owner) then ns/other (matching orphan)", got)
	}
}

func TestPodDeleteHandlerEH7EH8(t *testing.T) {
	d := newRecreateDeployment(3)
	rs := newRS(d, "nginx-a", "x", 0, 0, nil)
	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true),
		}}}}
	}
	t.Run("RC-8 last pod gone wakes Recreate deployment", func(t *testing.T) {
		f := newFixture(t, d, rs)
		f.c.onPodDelete(klog.Background(), cache.DeletedFinalStateUnknown{Obj: pod("p1")})
		if got := f.enqueued(); len(got) != 1 || got[0] != nginxKey {
			t.Errorf("enqueued %v", got)
		}
	})
	t.Run("pods remain: no wake-up", func(t *testing.T) {
		f := newFixture(t, d, rs, pod("p2"))
		f.c.onPodDelete(klog.Background(), pod("p1"))
		if got := f.enqueued(); len(got) != 0 {
			t.Errorf("enqueued %v", got)
		}
	})
	t.Run("EX-3 TerminationComplete: every pod delete wakes the rolling deployment", func(t *testing.T) {
		r := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
		r.Annotations = map[string]string{rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
		f := newFixture(t, r, rs, pod("p2"))
		f.c.onPodDelete(klog.Background(), pod("p1"))
		if got := f.enqueued(); len(got) != 1 || got[0] != nginxKey {
			t.Errorf("enqueued %v", got)
		}
	})
	t.Run("EH-7 a pod of a ReplicaSet kind of another group: no wake-up", func(t *testing.T) {
		f := newFixture(t, d, rs)
		p := pod("p1")
		p.OwnerReferences[0].APIVersion = "example.com/v1"
		f.c.onPodDelete(klog.Background(), p)
		if got := f.enqueued(); len(got) != 0 {
			t.Errorf("enqueued %v", got)
		}
	})
	t.Run("RollingUpdate deployments ignore pod deletes", func(t *testing.T) {
		r := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
		f := newFixture(t, r, rs)
		f.c.onPodDelete(klog.Background(), pod("p1"))
		if got := f.enqueued(); len(got) != 0 {
			t.Errorf("enqueued %v", got)
		}
	})
}
