package upplan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestPlanPicksTheControllersVictims (issue 24; RS-14): the plan runs the
// ReplicaSet controller's own sync on the cluster's pods, so the old pods it
// deletes first are the ones the controllers then delete. The old
// ReplicaSet has six pods spread by the scheduler over the nodes; one is
// made not Ready (its image "broken", so KWOK leaves it so) and the others
// get pod-deletion-cost annotations 0..4 (RS-14 rules 3 and 4 decide: the
// not-Ready pod, then the cheapest). With maxSurge 0 and maxUnavailable 2,
// the first deletions are chosen before any new pod exists. Costs, not ages,
// decide among the Ready pods on purpose: RS-14 compares ages in log2
// buckets of now, and pods created and Ready in the same second tie
// completely, so the controllers' own choice among them is not fixed.
func TestPlanPicksTheControllersVictims(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "victims", 6, "nginx:1.9")
	surge, unavailable := intstr.FromInt32(0), intstr.FromInt32(2)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "victims", rolloutTimeout)
	pods := oldestFirst(ctx, t, ns)
	unready := pods[0].Name
	makeUnready(ctx, t, ns, unready)
	for i, p := range pods[1:] {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"%d"}}}`, i)
		if _, err := env.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, time.Minute, "the Deployment to count 5 ready pods", func(ctx context.Context) (bool, error) {
		cur, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "victims", metav1.GetOptions{})
		return err == nil && cur.Status.ReadyReplicas == 5 && cur.Status.ObservedGeneration == cur.Generation, err
	})

	p := plan(ctx, t, ns, "victims", "nginx:1.9.3")
	var planned []string
	for _, s := range p.Steps {
		if s.Seconds > 0 {
			break
		}
		planned = append(planned, s.DeletedPods...)
	}
	slices.Sort(planned)
	want := []string{pods[0].Name, pods[1].Name}
	slices.Sort(want)
	if !slices.Equal(planned, want) {
		t.Fatalf("plan deletes %v at its start, want %v (%s not Ready, %s the lowest cost); steps %+v", planned, want, unready, pods[1].Name, p.Steps)
	}

	deleted := watchDeletions(t, ns)
	harness.SetImage(ctx, t, env.Client, ns, "victims", "victims", "nginx:1.9.3")
	var got []string
	harness.Eventually(t, time.Minute, "two pods deleted", func(context.Context) (bool, error) {
		got = deleted.first(2)
		return len(got) == 2, nil
	})
	slices.Sort(got)
	if !slices.Equal(got, planned) {
		t.Errorf("the controllers deleted %v first, the plan %v", got, planned)
	} else {
		t.Logf("plan and controllers deleted %v first (%s not Ready)", got, unready)
	}
}

// oldestFirst returns ns's pods, oldest first (ties by name).
func oldestFirst(ctx context.Context, t *testing.T, ns string) []v1.Pod {
	t.Helper()
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b v1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return list.Items
}

// makeUnready makes pod name of ns not Ready for good: its image becomes
// "nginx:broken" (KWOK's pod-ready stage then never fires for it) and its
// Ready condition False.
func makeUnready(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"victims","image":"nginx:broken"}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	if _, err := env.Client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":"`+now+`"},`+
			`{"type":"ContainersReady","status":"False","lastTransitionTime":"`+now+`"}]}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// deletionLog records, in order, the pods of a namespace that get a
// deletionTimestamp or are deleted.
type deletionLog struct {
	mu    sync.Mutex
	names []string
}

func (l *deletionLog) add(pod *v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.names, pod.Name) {
		l.names = append(l.names, pod.Name)
	}
}

// first returns the first n names, or fewer while fewer were deleted.
func (l *deletionLog) first(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names[:min(n, len(l.names))])
}

func watchDeletions(t *testing.T, ns string) *deletionLog {
	t.Helper()
	l := &deletionLog{}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, cur any) {
			if pod, ok := cur.(*v1.Pod); ok && pod.DeletionTimestamp != nil {
				l.add(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				l.add(pod)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return l
}
