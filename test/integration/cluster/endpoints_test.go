package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// sliceWatch follows the EndpointSlices of one Service with its own informer and, at every change it sees,
// counts the distinct addresses the slices list as ready; it keeps the fewest since the last reset.
type sliceWatch struct {
	store cache.Store
	stop  chan struct{}

	mu       sync.Mutex
	ready    []string // the ready addresses after the last change, sorted
	minReady int
	changes  int
}

// watchSlices starts a sliceWatch on the EndpointSlices of Service ns/service and waits for its informer to sync.
// It stops when t ends.
func watchSlices(t *testing.T, ns, service string) *sliceWatch {
	t.Helper()
	w := &sliceWatch{stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + service
		}))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	w.store = inf.GetStore()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.recount() },
		UpdateFunc: func(any, any) { w.recount() },
		DeleteFunc: func(any) { w.recount() },
	}); err != nil {
		t.Fatalf("EndpointSlice watch: %v", err)
	}
	factory.Start(w.stop)
	t.Cleanup(func() { close(w.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("EndpointSlice watch did not sync within a minute")
	}
	w.reset()
	return w
}

// recount recomputes the ready addresses from the store and lowers the minimum.
func (w *sliceWatch) recount() {
	seen := map[string]bool{}
	for _, obj := range w.store.List() {
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range slice.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				for _, a := range ep.Addresses {
					seen[a] = true
				}
			}
		}
	}
	ready := make([]string, 0, len(seen))
	for a := range seen {
		ready = append(ready, a)
	}
	slices.Sort(ready)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready = ready
	w.changes++
	w.minReady = min(w.minReady, len(ready))
}

// reset starts a new window at the current ready addresses.
func (w *sliceWatch) reset() {
	w.recount()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.minReady, w.changes = len(w.ready), 0
}

// now returns the ready addresses after the last change, the fewest ready since the last reset and the changes seen.
func (w *sliceWatch) now() (ready []string, minReady, changes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ready), w.minReady, w.changes
}

// readyPodIPs returns, sorted, the IPs of the pods in ns matching selector that are Ready and not terminating,
// or the API error.
func readyPodIPs(ctx context.Context, ns string, selector labels.Selector) ([]string, error) {
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(&p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	slices.Sort(ips)
	return ips, nil
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// sliceMatchTimeout is how long waitSliceMatchesPods waits.
const sliceMatchTimeout = time.Minute

// waitSliceMatchesPods waits until w's ready addresses are exactly the IPs of the n ready pods of selector. On
// a timeout the failure says what it saw last: the slice's addresses, the pods' IPs, any IP two ready pods
// share (the slice lists it once, so they can never match) and the last API error.
func waitSliceMatchesPods(t *testing.T, w *sliceWatch, ns string, selector labels.Selector, n int) []string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(sliceMatchTimeout); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ips, err := readyPodIPs(ctx, ns, selector)
		cancel()
		ready, _, _ := w.now()
		last = fmt.Sprintf("slice %v, pods %v, shared IPs %v, error %v", ready, ips, shared(ips), err)
		if err == nil && len(ips) == n && slices.Equal(ready, ips) {
			t.Logf("EndpointSlice ready endpoints = ready pods' IPs: %d (%s)", len(ips), last)
			return ips
		}
		if time.Now().After(deadline) {
			t.Fatalf("the EndpointSlice did not list the %d ready pods' IPs within %s; last seen: %s", n, sliceMatchTimeout, last)
		}
	}
}

// shared returns the IPs that occur more than once in sorted.
func shared(sorted []string) []string {
	var out []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] && (len(out) == 0 || out[len(out)-1] != sorted[i]) {
			out = append(out, sorted[i])
		}
	}
	return out
}

// TestServiceEndpointsFollowRollingUpdate: a Deployment exposed by a Service (`kubectl expose deployment … --port
// 80`) gets an EndpointSlice listing its ready pods' IPs; during a rolling update the slices never list fewer
// ready endpoints than replicas − maxUnavailable, checked at every EndpointSlice change; afterwards they list the
// ready pods' IPs again, now the new ReplicaSet's (issue 22).
func TestServiceEndpointsFollowRollingUpdate(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	const replicas, minReady = 10, 8 // maxUnavailable 25% of 10 rounds down to 2
	d := harness.NewDeployment(ns, "web", replicas, "nginx:1.9")
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1.ServiceSpec{
			Selector: d.Spec.Selector.MatchLabels,
			Ports:    []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: v1.ProtocolTCP}},
		},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	w := watchSlices(t, ns, "web")
	waitSliceMatchesPods(t, w, ns, selector, replicas)

	w.reset()
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:1.9.3")
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	// The ready pods are now all the new ReplicaSet's (the old one is at 0 and terminating pods are not ready).
	waitSliceMatchesPods(t, w, ns, selector, replicas)

	_, fewest, changes := w.now()
	t.Logf("during the rolling update: %d EndpointSlice changes, at least %d ready endpoints (bound %d)", changes, fewest, minReady)
	if fewest < minReady {
		t.Errorf("EndpointSlices listed %d ready endpoints during the rolling update, fewer than replicas - maxUnavailable = %d", fewest, minReady)
	}
	// Every pod was replaced, so the slices must have changed at least once per new pod: a watch that saw
	// nothing would pass the bound vacuously.
	if changes < replicas {
		t.Errorf("only %d EndpointSlice changes seen during a rollout of %d pods", changes, replicas)
	}
}
