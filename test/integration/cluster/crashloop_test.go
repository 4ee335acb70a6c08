package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// podLife is what a podHistory saw of one pod, at every change.
type podLife struct {
	app         string // the pod's app label: its Deployment
	ready       bool   // at the last change
	restarts    int32  // the first container's restartCount at the last change
	becameReady int    // changes from not Ready to Ready (the first start included)
	crashes     int    // changes from Ready to not Ready
}

// podHistory follows every pod of a namespace with its own informer and records, per pod, its Ready transitions
// and restartCount, and every change that breaks the crash loop's rules (see observe).
type podHistory struct {
	mu       sync.Mutex
	pods     map[string]*podLife
	problems []string
}

// watchPodHistory starts a podHistory on namespace ns and waits for its informer to sync. It stops when t ends.
func watchPodHistory(t *testing.T, ns string) *podHistory {
	t.Helper()
	h := &podHistory{pods: map[string]*podLife{}}
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok {
			h.observe(pod)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		t.Fatalf("pod watch: %v", err)
	}
	factory.Start(stop)
	t.Cleanup(func() { close(stop) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod watch did not sync within a minute")
	}
	return h
}

// observe records one version of pod. A crash (Ready to not Ready) must raise restartCount by exactly one and
// show the container waiting in CrashLoopBackOff after exiting with code 1 (reason Error); restartCount never goes
// down, and never changes while the pod stays Ready or comes back Ready.
func (h *podHistory) observe(pod *v1.Pod) {
	if pod.DeletionTimestamp != nil || len(pod.Status.ContainerStatuses) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	life := h.pods[pod.Name]
	if life == nil {
		life = &podLife{app: pod.Labels["app"]}
		h.pods[pod.Name] = life
	}
	cs := pod.Status.ContainerStatuses[0]
	ready := podReady(pod)
	switch {
	case ready && !life.ready:
		life.becameReady++
		if cs.RestartCount != life.restarts {
			h.problems = append(h.problems, fmt.Sprintf("pod %s came Ready with restartCount %d, was %d", pod.Name, cs.RestartCount, life.restarts))
		}
	case !ready && life.ready:
		life.crashes++
		if problem := crashProblem(cs, life.restarts); problem != "" {
			h.problems = append(h.problems, fmt.Sprintf("pod %s crash %d: %s", pod.Name, life.crashes, problem))
		}
	case cs.RestartCount != life.restarts:
		h.problems = append(h.problems, fmt.Sprintf("pod %s restartCount %d → %d without a crash", pod.Name, life.restarts, cs.RestartCount))
	}
	life.ready, life.restarts = ready, cs.RestartCount
}

// crashProblem says what is wrong with the status cs of a container that has just crashed, after restarts
// restarts; "" if nothing.
func crashProblem(cs v1.ContainerStatus, restarts int32) string {
	term := cs.LastTerminationState.Terminated
	switch {
	case cs.RestartCount != restarts+1:
		return fmt.Sprintf("restartCount %d, want %d", cs.RestartCount, restarts+1)
	case cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff":
		return fmt.Sprintf("state %+v, want waiting in CrashLoopBackOff", cs.State)
	case term == nil || term.ExitCode != 1 || term.Reason != "Error":
		return fmt.Sprintf("lastState %+v, want terminated with exit code 1, reason Error", cs.LastTerminationState)
	}
	return ""
}

// of returns a copy of what h saw of the pods of app app.
func (h *podHistory) of(app string) map[string]podLife {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]podLife{}
	for name, life := range h.pods {
		if life.app == app {
			out[name] = *life
		}
	}
	return out
}

// TestCrashLoopPodsRestart: on a cluster timed as `up` is, the pods of a Deployment of nginx:crashloop (issue 47's
// simulated crash loop, internal/controlplane's pod-crashloop-* stages) start Ready, then turn not Ready (waiting in
// CrashLoopBackOff after exit code 1) and Ready again over and over, their restartCount going up by one at each
// crash, past 1; the nginx:1 pod of a Deployment beside them stays Ready and never restarts; and a crash-looping
// pod is deleted like any other. Two restarts take about 2 × (5 s + 1 s) after the pods start.
func TestCrashLoopPodsRestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	history := watchPodHistory(t, ns)
	for _, d := range []struct {
		name     string
		replicas int32
		image    string
	}{{"crash", 2, "nginx:crashloop"}, {"steady", 1, "nginx:1"}} {
		if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, d.name, d.replicas, d.image), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, time.Minute, "2 crashloop pods to crash twice and come back Ready", func(context.Context) (bool, error) {
		done := 0
		for _, life := range history.of("crash") {
			if life.restarts >= 2 && life.crashes >= 2 && life.becameReady >= 2 {
				done++
			}
		}
		return done >= 2, nil
	})
	history.mu.Lock()
	for _, p := range history.problems {
		t.Error(p)
	}
	history.mu.Unlock()
	checkSteady(t, history.of("steady"))
	deleteCrashLoopPod(t, ctx, ns, history)
}

// checkSteady: the nginx:1 pod became Ready once and never crashed or restarted.
func checkSteady(t *testing.T, steady map[string]podLife) {
	t.Helper()
	if len(steady) != 1 {
		t.Fatalf("saw %d nginx:1 pods, want 1: %+v", len(steady), steady)
	}
	for name, life := range steady {
		if !life.ready || life.becameReady != 1 || life.crashes != 0 || life.restarts != 0 {
			t.Errorf("nginx:1 pod %s: %+v; want Ready once, never crashed, restartCount 0", name, life)
		}
	}
}

// deleteCrashLoopPod deletes one crash-looping pod and waits for it to be gone (KWOK's pod-delete stage).
func deleteCrashLoopPod(t *testing.T, ctx context.Context, ns string, history *podHistory) {
	t.Helper()
	var name string
	for n := range history.of("crash") {
		name = n
		break
	}
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	harness.Eventually(t, 30*time.Second, "crash-looping pod "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
