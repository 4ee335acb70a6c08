package simulator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

const zone = "topology.kubernetes.io/zone"

// zonedNodes are six nodes, two in each of zones a, b and c.
func zonedNodes() []*v1.Node {
	var out []*v1.Node
	for _, z := range []string{"a", "b", "c"} {
		for i := 1; i <= 2; i++ {
			out = append(out, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%s%d", z, i), Labels: map[string]string{zone: "zone-" + z}}})
		}
	}
	return out
}

// spreadState is d (9 replicas, annotated with value unless empty) fully rolled out, its nine pods three per
// zone, zone a's all on one node: RS-14 alone (pods sharing a node first, then the newest) would take zone a's
// three and two of zone b's.
func spreadState(t *testing.T, value string) State {
	t.Helper()
	surge, unavailable := pct25()
	d := newDeployment(9, surge, unavailable)
	if value != "" {
		d.Annotations = map[string]string{rolloutstate.ScaleDownSpreadAnnotation: value}
	}
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs.Annotations = maps.Clone(d.Annotations)
	rs.UID = "rs-uid"
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var pods []*v1.Pod
	for i, node := range []string{"node-a1", "node-a1", "node-a1", "node-b1", "node-b1", "node-b2", "node-c1", "node-c1", "node-c2"} {
		at := metav1.NewTime(start.Add(-time.Duration(i+1) * time.Hour))
		pods = append(pods, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nginx-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("pod-%d", i)),
				Labels: rs.Spec.Template.Labels, CreationTimestamp: at, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec:   v1.PodSpec{NodeName: node},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: at}}},
		})
	}
	return State{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: pods, Nodes: zonedNodes(), Now: start}
}

func skew(spread map[string]int) int {
	vals := slices.Collect(maps.Values(spread))
	return slices.Max(vals) - slices.Min(vals)
}

// TestPlanSpread: with kubedeploy.io/scale-down-spread and the nodes, the plan scales down by EX-4 (the real
// ReplicaSet sync with a node cache), places new pods across the zones, and reports the spread of each step.
func TestPlanSpread(t *testing.T) {
	t.Run("scale 9 to 4", func(t *testing.T) {
		from := spreadState(t, zone)
		from.Deployment.Spec.Replicas = ptr.To[int32](4)
		p, err := Simulate(context.Background(), from, Config{})
		if err != nil {
			t.Fatal(err)
		}
		last := p.Steps[len(p.Steps)-1]
		if p.SpreadKey != zone || last.Spread == nil || skew(last.Spread) > 1 {
			t.Fatalf("spread key %q, last step %+v: want the zones within 1", p.SpreadKey, last)
		}
	})
	t.Run("without the annotation RS-14 takes the newest", func(t *testing.T) {
		from := spreadState(t, "")
		from.Deployment.Spec.Replicas = ptr.To[int32](4)
		p, err := Simulate(context.Background(), from, Config{})
		if err != nil {
			t.Fatal(err)
		}
		last := p.Steps[len(p.Steps)-1]
		if p.SpreadKey != "" || last.Spread != nil {
			t.Fatalf("spread key %q, spread %v: want none without the annotation", p.SpreadKey, last.Spread)
		}
		if want := []string{"nginx-0", "nginx-1", "nginx-2", "nginx-3", "nginx-4"}; !slices.Equal(last.DeletedPods, want) {
			t.Fatalf("deleted %v, want RS-14's %v (zones a and b emptied)", last.DeletedPods, want)
		}
	})
	t.Run("roll at 9 places new pods across the zones", func(t *testing.T) {
		from := spreadState(t, zone)
		// The constraint spreads each revision's pods (matchLabelKeys: pod-template-hash); without it the
		// model, like the scheduler, places new pods around the old ones and can end two apart.
		from.Deployment.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: v1.DoNotSchedule, MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey},
			LabelSelector: from.Deployment.Spec.Selector,
		}}
		from.Deployment.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
		p, err := Simulate(context.Background(), from, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Complete {
			t.Fatalf("not complete: %s", p.Stopped)
		}
		for i, s := range p.Steps {
			if total := s.Spread["zone-a"] + s.Spread["zone-b"] + s.Spread["zone-c"]; len(s.Spread) != 3 || total == 0 {
				t.Fatalf("step %d spread %v", i+1, s.Spread)
			}
		}
		if last := p.Steps[len(p.Steps)-1].Spread; skew(last) > 1 {
			t.Fatalf("the rollout ends with %v, want the zones within 1", last)
		}
	})
}
