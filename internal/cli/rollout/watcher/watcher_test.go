package watcher

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu     sync.Mutex
	listed []*v1.Event
	synced bool
	states []int32 // the size of the first ReplicaSet per State call
	times  []time.Time
	events []string
}

func (r *recorder) Synced(events []*v1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced, r.listed = true, events
}

func (r *recorder) State(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := int32(-1)
	if len(rss) > 0 {
		size = *rss[0].Spec.Replicas
	}
	r.states, r.times = append(r.states, size), append(r.times, at)
}

func (r *recorder) Event(e *v1.Event, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e.Reason)
}

func (r *recorder) lastState() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return -2
	}
	return r.states[len(r.states)-1]
}

func objects() (*appsv1.Deployment, *appsv1.ReplicaSet, *v1.Pod, *v1.Event) {
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs-uid", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2)},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1-a", Namespace: "ns", Labels: labels}}
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "ns", UID: "e1"},
		InvolvedObject: v1.ObjectReference{Kind: "Deployment", Name: "web", Namespace: "ns"},
		Reason:         "ScalingReplicaSet",
	}
	return d, rs, pod, ev
}

// start runs Start on a fake cluster holding objects() and stops the
// watcher when the test ends.
func start(t *testing.T, cfg Config) (*Watcher, *fake.Clientset, *appsv1.Deployment) {
	t.Helper()
	d, rs, pod, ev := objects()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
		Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"nginx"}}}}}
	client := fake.NewClientset(d, rs, pod, ev, node, analysisTemplate("ns", "error-rate", "true"),
		analysisTemplate("ns", "settings", ""), analysisTemplate("other", "latency", "true"))
	watches := controllertest.RecordWatches(client)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Start(ctx, client, d, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		w.Shutdown()
	})
	resources := []string{"deployments", "replicasets", "pods"}
	if cfg.Events {
		resources = append(resources, "events")
	}
	if cfg.Nodes {
		resources = append(resources, "nodes")
	}
	if cfg.AnalysisTemplates {
		resources = append(resources, "configmaps")
	}
	watches.Wait(t, resources...)
	return w, client, d
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// After Start the caches hold every object and the Observer was told the
// first list's events and the first state, stamped by the Clock.
func TestStartFillsCachesAndTellsObserver(t *testing.T) {
	obs := &recorder{}
	w, _, _ := start(t, Config{Events: true, Observer: obs, Clock: clocktesting.NewFakePassiveClock(t0)})
	in, err := w.Input(3)
	if err != nil {
		t.Fatal(err)
	}
	if in.Deployment.Name != "web" || len(in.ReplicaSets) != 1 || len(in.Pods) != 1 || len(in.Events) != 1 || in.MaxEvents != 3 {
		t.Errorf("input %+v", in)
	}
	// The handlers run behind the caches: the event arrives by itself.
	waitFor(t, "the event", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.events) > 0
	})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !obs.synced || len(obs.listed) != 1 || len(obs.states) == 0 {
		t.Fatalf("observer: synced %v, listed %d, states %v", obs.synced, len(obs.listed), obs.states)
	}
	// Start tells the state itself once synced; the handlers may too.
	for i, size := range obs.states {
		if size != 2 || !obs.times[i].Equal(t0) {
			t.Errorf("state %d: size %d at %v, want 2 at %v", i, size, obs.times[i], t0)
		}
	}
	if len(obs.events) != 1 || obs.events[0] != "ScalingReplicaSet" {
		t.Errorf("observer events %v", obs.events)
	}
}

// With Nodes, the Input holds the nodes with their names and labels only (EX-4's spread); without, none.
func TestNodes(t *testing.T) {
	w, _, _ := start(t, Config{Nodes: true})
	in, err := w.Input(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Nodes) != 1 || in.Nodes[0].Name != "node-a" || in.Nodes[0].Labels["topology.kubernetes.io/zone"] != "zone-a" || in.Nodes[0].Status.Images != nil {
		t.Errorf("nodes %+v, want node-a with its labels only", in.Nodes)
	}
	w, _, _ = start(t, Config{})
	if in, err = w.Input(0); err != nil || in.Nodes != nil {
		t.Errorf("without Nodes: nodes %v, %v; want none", in.Nodes, err)
	}
}

// analysisTemplate is ConfigMap ns/name, labelled kubedeploy.io/analysis-template=label unless label is "".
func analysisTemplate(ns, name, label string) *v1.ConfigMap {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if label != "" {
		cm.Labels = map[string]string{"kubedeploy.io/analysis-template": label}
	}
	return cm
}

// With AnalysisTemplates (EX-6), the Input holds the analysis templates of the Deployment's namespace only (not
// its other ConfigMaps, nor another namespace's templates); without, none.
func TestAnalysisTemplates(t *testing.T) {
	w, _, _ := start(t, Config{AnalysisTemplates: true})
	in, err := w.Input(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.AnalysisTemplates) != 1 || in.AnalysisTemplates[0].Name != "error-rate" {
		t.Errorf("analysis templates %+v, want ns/error-rate only", in.AnalysisTemplates)
	}
	w, _, _ = start(t, Config{})
	if in, err = w.Input(0); err != nil || in.AnalysisTemplates != nil {
		t.Errorf("without AnalysisTemplates: %v, %v; want none", in.AnalysisTemplates, err)
	}
}

// Without Events no event is cached, whatever the Input asks for.
func TestNoEvents(t *testing.T) {
	w, _, _ := start(t, Config{})
	in, err := w.Input(3)
	if err != nil || len(in.Events) != 0 {
		t.Errorf("input events %d, err %v", len(in.Events), err)
	}
	w.Flush() // no Observer: nothing to tell, no panic
}

// A change to a ReplicaSet is signalled on Changed and told to the Observer.
func TestChangeIsSignalledAndObserved(t *testing.T) {
	obs := &recorder{}
	w, client, _ := start(t, Config{Observer: obs})
	select { // drain the signals of the first list
	case <-w.Changed():
	default:
	}
	rs, err := client.AppsV1().ReplicaSets("ns").Get(context.Background(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Spec.Replicas = ptr.To[int32](5)
	if _, err := client.AppsV1().ReplicaSets("ns").Update(context.Background(), rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled")
	}
	waitFor(t, "the Observer to see 5 replicas", func() bool { return obs.lastState() == 5 })
	in, err := w.Input(0)
	if err != nil || *in.ReplicaSets[0].Spec.Replicas != 5 {
		t.Errorf("input after the change: %v", err)
	}
}

// A deleted Deployment is a NotFound error; one deleted and created again
// (another UID) is an error that says so.
func TestDeploymentGoneOrReplaced(t *testing.T) {
	w, client, d := start(t, Config{})
	ctx := context.Background()
	if err := client.AppsV1().Deployments("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion", func() bool {
		_, err := w.Deployment()
		return apierrors.IsNotFound(err)
	})
	if _, err := w.Input(0); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "the rollout cannot end") {
		t.Errorf("input of a deleted Deployment: %v", err)
	}
	again := d.DeepCopy()
	again.UID, again.ResourceVersion = "another-uid", ""
	if _, err := client.AppsV1().Deployments("ns").Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new Deployment", func() bool {
		_, err := w.Deployment()
		return err != nil && strings.Contains(err.Error(), "deleted and created again")
	})
}

// A Deployment whose selector selects nothing, or everything, is refused
// before any informer starts.
func TestBadSelector(t *testing.T) {
	d, _, _, _ := objects()
	d.Spec.Selector = &metav1.LabelSelector{}
	if _, err := Start(context.Background(), fake.NewClientset(), d, Config{}); err == nil || !strings.Contains(err.Error(), "empty selector") {
		t.Errorf("empty selector: %v", err)
	}
	d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	if _, err := Start(context.Background(), fake.NewClientset(), d, Config{}); err == nil || !strings.Contains(err.Error(), "invalid selector") {
		t.Errorf("invalid selector: %v", err)
	}
}

// Start gives up with ctx's error when the caches cannot sync.
func TestStartCancelled(t *testing.T) {
	d, _, _, _ := objects()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, fake.NewClientset(d), d, Config{}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled start: %v", err)
	}
}
