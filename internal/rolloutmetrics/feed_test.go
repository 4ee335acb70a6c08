package rolloutmetrics

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// The feeder shows the tracker a Deployment when it, one of its
// ReplicaSets or one of their pods changes (the waits in between brought
// up to now by InProgress); a deleted Deployment is forgotten.
func TestFeeder(t *testing.T) {
	c := newCluster("nginx:2")
	c.rs("nginx:1", "1", at(-100))
	rs2 := c.rs("nginx:2", "2", at(-10))
	c.progressing("ReplicaSetUpdated")
	c.pod(rs2, "new-a", "ImagePullBackOff")
	client := fake.NewClientset(c.d, c.rss[0], c.rss[1], c.pods[0])
	var ended []Ended
	tr := newTracker(&ended)
	var forgot atomic.Int32
	tr.OnForget = func(string, string) { forgot.Add(1) }
	clk := clocktesting.NewFakeClock(t0)
	ctx, f, factory := startFeeder(t, client, tr, clk)
	f.Step()
	got := tr.InProgress(t0)
	if len(got) != 1 || got[0].Wait != (Wait{ImagePull, "ImagePullBackOff"}) || !got[0].Start.Equal(at(-10)) {
		t.Fatalf("in progress %+v, want web-2's rollout waiting on ImagePullBackOff since -10s", got)
	}

	// In progress: every step observes it, changed or not.
	clk.Step(3 * time.Second)
	f.Step()
	if r := tr.InProgress(clk.Now())[0]; r.Waited[ImagePull] != 13*time.Second {
		t.Errorf("waited %v after 3s more, want image_pull 13s", r.Waited)
	}

	// A pod change reaches the tracker through its ReplicaSet.
	startPod(ctx, t, client, factory, c.pods[0])
	waitNoted(t, f)
	clk.Step(time.Second)
	f.Step()
	if r := tr.InProgress(clk.Now())[0]; r.Wait.On != Startup {
		t.Errorf("wait %+v after the pod started, want startup", r.Wait)
	}

	// Complete: the rollout ends and is no longer stepped.
	completeDeployment(ctx, t, client, factory, c.d, c.rss)
	waitNoted(t, f)
	clk.Step(time.Second)
	f.Step()
	if len(ended) != 1 || ended[0].Outcome != Complete || ended[0].Duration() != 15*time.Second {
		t.Fatalf("ended %+v, want one complete after 15s", ended)
	}

	if err := client.AppsV1().Deployments("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Deployment to be forgotten", func() bool { return forgot.Load() == 1 })
}

// startFeeder starts informers on client and a Feeder of them for tr on clk,
// stopped when the test ends, and waits until the caches are synced, their
// watches open and the handlers have noted the Deployment. It returns the
// informers' context, the Feeder and the informers.
func startFeeder(t *testing.T, client *fake.Clientset, tr *Tracker, clk *clocktesting.FakeClock) (context.Context, *Feeder, informers.SharedInformerFactory) {
	t.Helper()
	watches := controllertest.RecordWatches(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	f, err := NewFeeder(tr, Sources{
		Deployments: factory.Apps().V1().Deployments(),
		ReplicaSets: factory.Apps().V1().ReplicaSets(),
		Pods:        factory.Core().V1().Pods(),
	}, clk, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.WaitForCacheSync(ctx.Done())
	watches.Wait(t, "deployments", "replicasets", "pods")
	waitNoted(t, f)
	return ctx, f, factory
}

// waitNoted waits until f's handlers noted a Deployment for the next Step. The handlers run after the informer's
// cache has an object, so a lister that shows a change does not mean the Step after it will see it (CI saw
// the pod's start missed that way).
func waitNoted(t *testing.T, f *Feeder) {
	t.Helper()
	poll(t, "the Deployment to be noted", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.dirty) > 0
	})
}

// startPod writes a copy of pod Running (started at t0) and waits until the
// pod informer has it.
func startPod(ctx context.Context, t *testing.T, client *fake.Clientset, factory informers.SharedInformerFactory, pod *v1.Pod) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t0}}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod change", func() bool {
		p, err := factory.Core().V1().Pods().Lister().Pods("ns").Get("new-a")
		return err == nil && p.Status.Phase == v1.PodRunning
	})
}

// completeDeployment writes the status of a complete rollout, as the controllers would, and waits until the
// informers have it: first the ReplicaSets' (the new one, rolloutstate.NewReplicaSet among rss, 4 of 4 available,
// the others none), then a copy of d's (NewReplicaSetAvailable, 4 of 4 replicas updated and available).
func completeDeployment(ctx context.Context, t *testing.T, client *fake.Clientset, factory informers.SharedInformerFactory, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) {
	t.Helper()
	newRS := rolloutstate.NewReplicaSet(d, rss)
	for _, rs := range rss {
		rs = rs.DeepCopy()
		rs.Status = appsv1.ReplicaSetStatus{}
		if rs.UID == newRS.UID {
			rs.Status = appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
		}
		if _, err := client.AppsV1().ReplicaSets("ns").UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "the ReplicaSet change", func() bool {
			got, err := factory.Apps().V1().ReplicaSets().Lister().ReplicaSets("ns").Get(rs.Name)
			return err == nil && got.Status.AvailableReplicas == rs.Status.AvailableReplicas
		})
	}
	d = d.DeepCopy()
	d.Status.Conditions[0].Reason = rolloutstate.NewReplicaSetAvailable
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 4, 4, 4
	if _, err := client.AppsV1().Deployments("ns").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Deployment change", func() bool {
		got, err := factory.Apps().V1().Deployments().Lister().Deployments("ns").Get("web")
		return err == nil && got.Status.AvailableReplicas == 4
	})
}

// poll waits up to 10 s for cond.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// A tombstone of a deleted Deployment is unwrapped.
func TestUnwrapTombstone(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u"}}
	if m, ok := unwrap(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: d}); !ok || m.GetUID() != "u" {
		t.Errorf("unwrap(tombstone) = %v, %v", m, ok)
	}
	if _, ok := unwrap("not an object"); ok {
		t.Errorf("unwrap(string) ok")
	}
}

// Only an update that may start or end a rollout is shown at once; one of
// the replica counts alone waits for the next step.
func TestMayStartOrEnd(t *testing.T) {
	c := newCluster("nginx:2")
	c.progressing("ReplicaSetUpdated")
	old := c.d
	counts := old.DeepCopy()
	counts.Status.UpdatedReplicas++
	counts.Status.ReadyReplicas++
	reason := old.DeepCopy()
	reason.Status.Conditions[len(reason.Status.Conditions)-1].Reason = rolloutstate.ProgressDeadlineExceeded
	generation := old.DeepCopy()
	generation.Generation++
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3"}
	for name, c := range map[string]struct {
		cur  *appsv1.Deployment
		want bool
	}{
		"counts": {counts, false}, "same": {old.DeepCopy(), false},
		"Progressing reason": {reason, true}, "generation": {generation, true}, "annotations": {annotated, true},
	} {
		if got := mayStartOrEnd(old, c.cur); got != c.want {
			t.Errorf("%s: mayStartOrEnd = %v, want %v", name, got, c.want)
		}
	}
}
