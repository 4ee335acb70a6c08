package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controlplane"
)

// ZoneKey is the well-known node label of a zone, the topologyKey of the spread scenario.
const ZoneKey = "topology.kubernetes.io/zone"

// SpreadOptions are the Options of issue 26's spread scenario: UpOptions on 6 nodes in 3 zones, as `kubedeploy
// up --zones 3 --nodes 6`, with kubedeploy's controllers (a test of upstream's changes ControlPlane and
// Controllers).
func SpreadOptions() Options {
	opts := UpOptions()
	opts.Nodes = 6
	opts.ControlPlane = func(c *controlplane.Config) { c.Zones = 3 }
	return opts
}

// SpreadWatch records, at every pod change its own informer sees in one namespace, how the live pods
// (bound to a node, not terminating, not finished) matching a selector are spread over the zones of the
// cluster's nodes, and the worst skew since the last Reset. The skew is max − min live pods per zone, over
// every zone a node is in (a zone with none of the pods counts as 0); pods on a node without the zone label
// count in a zone "" of their own. Safe for concurrent use.
type SpreadWatch struct {
	selector labels.Selector
	zoneOf   map[string]string // node name → zone
	zones    []string
	stop     chan struct{}
	store    cache.Store

	mu      sync.Mutex
	now     map[string]int
	worst   int
	worstAt map[string]int
	changes int
}

// WatchSpread starts a SpreadWatch on namespace ns for pods matching selector, with the nodes as they are
// now, and waits for its informer to sync. It stops when t ends.
func WatchSpread(t *testing.T, client kubernetes.Interface, ns string, selector labels.Selector) *SpreadWatch {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	w := &SpreadWatch{selector: selector, zoneOf: map[string]string{}, stop: make(chan struct{})}
	for _, n := range nodes.Items {
		w.zoneOf[n.Name] = n.Labels[ZoneKey]
		if !slices.Contains(w.zones, n.Labels[ZoneKey]) {
			w.zones = append(w.zones, n.Labels[ZoneKey])
		}
	}
	slices.Sort(w.zones)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	startInformer(t, factory, inf, w.stop, "spread watch", w.recount)
	t.Cleanup(w.Stop)
	w.Reset()
	return w
}

// recount recomputes the pods per zone from the store and widens the window.
func (w *SpreadWatch) recount() {
	counts := map[string]int{}
	for _, z := range w.zones {
		counts[z] = 0
	}
	for _, obj := range w.store.List() {
		p, ok := obj.(*v1.Pod)
		if !ok || !w.selector.Matches(labels.Set(p.Labels)) || p.Spec.NodeName == "" || p.DeletionTimestamp != nil ||
			p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		counts[w.zoneOf[p.Spec.NodeName]]++
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = counts
	w.changes++
	if s := Skew(counts); s > w.worst || w.worstAt == nil {
		w.worst, w.worstAt = s, counts
	}
}

// Skew is max − min of counts (0 for none).
func Skew(counts map[string]int) int {
	if len(counts) == 0 {
		return 0
	}
	vals := slices.Collect(maps.Values(counts))
	return slices.Max(vals) - slices.Min(vals)
}

// Reset starts a new window at the current spread.
func (w *SpreadWatch) Reset() {
	w.recount()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.worst, w.worstAt, w.changes = Skew(w.now), w.now, 0
}

// Now returns the live pods per zone after the last change seen.
func (w *SpreadWatch) Now() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.now)
}

// Worst returns, since the last Reset, the largest skew seen, the spread where it was first seen and the
// number of pod changes seen.
func (w *SpreadWatch) Worst() (skew int, at map[string]int, changes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.worst, maps.Clone(w.worstAt), w.changes
}

// Stop stops the informer; idempotent.
func (w *SpreadWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

// FormatSpread writes counts as "zone-a=3 zone-b=3 zone-c=3", zones in order.
func FormatSpread(counts map[string]int) string {
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(counts)) {
		name := z
		if name == "" {
			name = "(no zone)"
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, counts[z]))
	}
	return strings.Join(parts, " ")
}

// SpreadStep is one step of RunSpreadScenario as the SpreadWatch saw it.
type SpreadStep struct {
	// Name says what the step did ("create 9", "scale 9→4", "roll at 9").
	Name string
	// Settled is the live pods per zone once the step settled; SettledSkew its skew.
	Settled     map[string]int
	SettledSkew int
	// WorstSkew is the largest skew seen at any pod change during the step, first seen at WorstAt;
	// Changes the pod changes seen.
	WorstSkew int
	WorstAt   map[string]int
	Changes   int
}

// String is one line of the scenario's report.
func (s SpreadStep) String() string {
	return fmt.Sprintf("%-10s settled %s (skew %d); worst skew during the step %d (%s), %d pod changes",
		s.Name, FormatSpread(s.Settled), s.SettledSkew, s.WorstSkew, FormatSpread(s.WorstAt), s.Changes)
}

// SpreadDeployment returns the Deployment of issue 26's scenario: ns/name, replicas pods of nginx:1.9 spread
// over the zones by a topologySpreadConstraints of maxSkew 1, DoNotSchedule, over the pods labelled app=name;
// with perRevision, over those of the pod's own revision only (matchLabelKeys: [pod-template-hash], as the
// Kubernetes documentation advises for Deployments, so that a rolling update spreads the new pods among
// themselves rather than around the old ones about to go). With annotation not empty, it carries
// kubedeploy.io/scale-down-spread: annotation (EX-4).
func SpreadDeployment(ns, name string, replicas int32, annotation string, perRevision bool) *appsv1.Deployment {
	d := NewDeployment(ns, name, replicas, "nginx:1.9")
	d.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: ZoneKey, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
	}}
	if perRevision {
		d.Spec.Template.Spec.TopologySpreadConstraints[0].MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
	}
	if annotation != "" {
		d.Annotations = map[string]string{rolloutstate.ScaleDownSpreadAnnotation: annotation}
	}
	return d
}

// SpreadSteps are the names of RunSpreadScenario's steps in order; SpreadScaleSteps those that only scale.
var (
	SpreadSteps      = []string{"create 9", "scale 9→4", "scale 4→2", "scale 2→9", "roll at 9"}
	SpreadScaleSteps = SpreadSteps[1:4]
)

// RunSpreadScenario runs issue 26's scenario on Deployment d (SpreadDeployment's, 9 replicas, not yet
// created): create it, scale 9 → 4 → 2 → 9, then roll it to a new image at 9. After each step it waits up to
// timeout for the step to settle (the rollout complete, live pods = replicas, none terminating) and returns
// what a SpreadWatch saw, step by step. A RolloutWatch checks the surge bound of every ReplicaSet change and
// that one template never gets two ReplicaSets, over the whole scenario.
func RunSpreadScenario(ctx context.Context, t *testing.T, client kubernetes.Interface, d *appsv1.Deployment, timeout time.Duration) []SpreadStep {
	t.Helper()
	ns, name := d.Namespace, d.Name
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	spread := WatchSpread(t, client, ns, sel)
	pods := WatchPods(t, client, ns, sel)
	bounds := WatchRolloutWith(t, client, ns, name, WatchOptions{SurgeFromAnnotations: true, OneNewReplicaSet: true})
	var steps []SpreadStep
	step := func(what string, replicas int, change func()) {
		t.Helper()
		spread.Reset()
		change()
		WaitComplete(t, client, ns, name, timeout)
		Eventually(t, timeout, fmt.Sprintf("%s/%s: %d live pods, none terminating, all on nodes (%s)", ns, name, replicas, what),
			func(context.Context) (bool, error) {
				c, counts := pods.Now(), spread.Now()
				bound := 0
				for _, n := range counts {
					bound += n
				}
				return c.Live == replicas && c.Present == replicas && bound == replicas, nil
			})
		worst, at, changes := spread.Worst()
		settled := spread.Now()
		steps = append(steps, SpreadStep{Name: what, Settled: settled, SettledSkew: Skew(settled), WorstSkew: worst, WorstAt: at, Changes: changes})
	}
	step("create 9", 9, func() {
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s/%s: %v", ns, name, err)
		}
	})
	for _, s := range []struct{ from, to int32 }{{9, 4}, {4, 2}, {2, 9}} {
		step(fmt.Sprintf("scale %d→%d", s.from, s.to), int(s.to), func() { ScaleDeployment(ctx, t, client, ns, name, s.to) })
	}
	step("roll at 9", 9, func() { SetImage(ctx, t, client, ns, name, name, "nginx:1.9.3") })
	bounds.Stop()
	bounds.Check(5)
	if len(steps) != len(SpreadSteps) {
		t.Fatalf("%d steps settled, want %d", len(steps), len(SpreadSteps))
	}
	return steps
}
