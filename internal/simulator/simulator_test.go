package simulator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

func newDeployment(replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nginx", Namespace: "ns", UID: "d-uid", Generation: 1, ResourceVersion: "100",
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.14.2"}}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func newRecreateDeployment(replicas int32) *appsv1.Deployment {
	d := newDeployment(replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// pct25 returns maxSurge and maxUnavailable at their VA-1 defaults, 25%.
func pct25() (intstr.IntOrString, intstr.IntOrString) {
	return intstr.FromString("25%"), intstr.FromString("25%")
}

// simulateImageChange simulates rolling d (fully rolled out on its
// template) to image nginx:1.9.3 with annotations set on the changed
// Deployment.
func simulateImageChange(t testing.TB, d *appsv1.Deployment, annotations map[string]string, cfg Config) *Plan {
	t.Helper()
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	next := d.DeepCopy()
	next.Annotations = annotations
	next.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	p, err := Simulate(context.Background(), State{Deployment: next, ReplicaSets: []*appsv1.ReplicaSet{rs}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planFor simulates rolling d (fully rolled out on nginx:1.14.2) to image
// nginx:1.9.3 and requires the plan to complete.
func planFor(t *testing.T, d *appsv1.Deployment, cfg Config) *Plan {
	t.Helper()
	p := simulateImageChange(t, d, d.Annotations, cfg)
	if !p.Complete {
		t.Fatalf("plan not complete: %s (%+v)", p.Stopped, p.Steps)
	}
	return p
}

func newSizes(p *Plan) []int32 {
	var out []int32
	for _, s := range p.Steps {
		out = append(out, s.NewReplicas)
	}
	return out
}

func oldSizes(p *Plan) []int32 {
	var out []int32
	for _, s := range p.Steps {
		out = append(out, s.OldReplicas[0])
	}
	return out
}

// The seed Deployment: 20 replicas, 25%/25% (surge 5, unavailable 5). At
// t=0 the first sync creates the new ReplicaSet at 5 and shrinks the old one
// to 15 (RU-10, RU-11), the next grows the new one to 10 (25 pods); at t=1
// all 10 new pods are available, so the old one shrinks to 5 and the new one
// grows to 20; at t=2 the old one is gone. Never above 25 pods or below 15
// available.
func TestSimulateRollingSeed(t *testing.T) {
	surge, unavailable := pct25()
	p := planFor(t, newDeployment(20, surge, unavailable), Config{})
	if got, want := newSizes(p), []int32{5, 10, 10, 20, 20}; !slices.Equal(got, want) {
		t.Errorf("new ReplicaSet sizes = %v, want %v", got, want)
	}
	if got, want := oldSizes(p), []int32{15, 15, 5, 5, 0}; !slices.Equal(got, want) {
		t.Errorf("old ReplicaSet sizes = %v, want %v", got, want)
	}
	if got, want := seconds(p), []float64{0, 0, 1, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("step times = %v, want %v", got, want)
	}
	if p.PeakPods != 25 || p.MinAvailable != 15 || p.EstimatedSeconds != 2 {
		t.Errorf("peak %d, min available %d, %v s; want 25, 15, 2 s", p.PeakPods, p.MinAvailable, p.EstimatedSeconds)
	}
	if p.NewReplicaSet == "" || len(p.OldReplicaSets) != 1 {
		t.Errorf("names: new %q, old %v", p.NewReplicaSet, p.OldReplicaSets)
	}
	// What the controllers are compared with (test/integration/upplan).
	if got, want := p.NewReplicaSetSizes(), []int32{5, 10, 20}; !slices.Equal(got, want) {
		t.Errorf("NewReplicaSetSizes = %v, want %v", got, want)
	}
	if got, want := p.OldReplicaSetSizes(0), []int32{15, 5, 0}; !slices.Equal(got, want) {
		t.Errorf("OldReplicaSetSizes(0) = %v, want %v", got, want)
	}
}

func seconds(p *Plan) []float64 {
	var out []float64
	for _, s := range p.Steps {
		out = append(out, s.Seconds)
	}
	return out
}

// maxSurge 0 / maxUnavailable 1: one pod at a time, old first (RU-5).
func TestSimulateOneByOne(t *testing.T) {
	p := planFor(t, newDeployment(3, intstr.FromInt32(0), intstr.FromInt32(1)), Config{})
	// The first sync creates the new ReplicaSet at 0 and shrinks the old one.
	if got, want := oldSizes(p), []int32{2, 2, 1, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("old sizes = %v, want %v", got, want)
	}
	if got, want := newSizes(p), []int32{0, 1, 1, 2, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("new sizes = %v, want %v", got, want)
	}
	if p.PeakPods != 3 || p.MinAvailable != 2 {
		t.Errorf("peak %d, min available %d; want 3 and 2", p.PeakPods, p.MinAvailable)
	}
}

// Recreate: every old pod gone first (RC-2, RC-3), then the new ReplicaSet at
// full size (RC-4); the termination time counts.
func TestSimulateRecreate(t *testing.T) {
	p := planFor(t, newRecreateDeployment(20), Config{PodTermination: 2 * time.Second})
	if got, want := oldSizes(p), []int32{0, 0}; !slices.Equal(got, want) {
		t.Errorf("old sizes = %v, want %v", got, want)
	}
	if got, want := newSizes(p), []int32{0, 20}; !slices.Equal(got, want) {
		t.Errorf("new sizes = %v, want %v", got, want)
	}
	if p.Steps[0].NewReplicaSetExists || !p.Steps[1].NewReplicaSetExists {
		t.Errorf("the new ReplicaSet must appear in step 2 only: %+v", p.Steps)
	}
	if p.Steps[1].Seconds != 2 || p.EstimatedSeconds != 3 || p.MinAvailable != 0 || p.PeakPods != 20 {
		t.Errorf("plan = %+v", p)
	}
}

// minReadySeconds delays availability, so each rolling step waits for it
// too; a paused Deployment is planned as resumed and says so.
func TestSimulateMinReadyAndPaused(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(4, surge, unavailable)
	d.Spec.MinReadySeconds = 10
	d.Spec.Paused = true
	p := planFor(t, d, Config{PodStartup: 2 * time.Second})
	if !p.Paused {
		t.Error("Paused not reported")
	}
	// 4 replicas, surge 1, unavailable 1: each step's pods take 2 + 10 s.
	if p.EstimatedSeconds == 0 || int(p.EstimatedSeconds)%12 != 0 {
		t.Errorf("estimated %v s, want a multiple of 12", p.EstimatedSeconds)
	}
	if last := p.Steps[len(p.Steps)-1]; last.NewReplicas != 4 || last.OldReplicas[0] != 0 {
		t.Errorf("last step %+v", last)
	}
}

// Pods that never become available stop the plan, not the process.
func TestSimulateStopsWhenStuck(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(20, surge, unavailable)
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	next := d.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	p, err := Simulate(context.Background(), State{Deployment: next, ReplicaSets: []*appsv1.ReplicaSet{rs}}, Config{PodStartup: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The two t=0 steps happen; nothing after.
	if p.Complete || p.Stopped == "" || len(p.Steps) != 2 {
		t.Errorf("plan = %+v", p)
	}
}

func TestSimulateRejectsBadInput(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(3, surge, unavailable)
	d.Spec.Selector = nil
	if _, err := Simulate(context.Background(), State{Deployment: d}, Config{}); err == nil {
		t.Error("no error for a Deployment without selector")
	}
	d = newDeployment(3, intstr.FromString("x%"), intstr.FromInt32(0))
	if _, err := Simulate(context.Background(), State{Deployment: d}, Config{}); err == nil {
		t.Error("no error for an invalid maxSurge")
	}
	d = newDeployment(3, surge, unavailable)
	rs, _ := SteadyReplicaSet(context.Background(), d)
	rs.OwnerReferences[0].UID = "someone-else"
	if _, err := Simulate(context.Background(), State{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}}, Config{}); err == nil {
		t.Error("no error for a ReplicaSet of another owner")
	}
}

// partitionedPlan simulates rolling d (fully rolled out on nginx:1.14.2) to
// nginx:1.9.3 with partition value v.
func partitionedPlan(t *testing.T, d *appsv1.Deployment, v string) *Plan {
	t.Helper()
	return simulateImageChange(t, d, map[string]string{rolloutstate.RolloutPartitionAnnotation: v}, Config{})
}

// EX-1 on the seed Deployment (20 replicas, 25%/25%): partition 5 creates
// the new ReplicaSet at 5, the old one goes to 15 and stays there; "50%"
// stops at 10 and 10. Never above 25 pods or below 15 available.
func TestSimulatePartitionHolds(t *testing.T) {
	surge, unavailable := pct25()
	for _, tc := range []struct {
		v                string
		wantNew, wantOld []int32
	}{
		{v: "5", wantNew: []int32{5}, wantOld: []int32{15}},
		{v: "50%", wantNew: []int32{5, 10}, wantOld: []int32{15, 10}},
		{v: "0", wantNew: []int32{0}, wantOld: nil},
	} {
		t.Run(tc.v, func(t *testing.T) {
			p := partitionedPlan(t, newDeployment(20, surge, unavailable), tc.v)
			if p.Complete || !p.Partitioned || !strings.Contains(p.Stopped, rolloutstate.RolloutPartitionAnnotation) {
				t.Fatalf("plan complete %v, partitioned %v, stopped %q; want held", p.Complete, p.Partitioned, p.Stopped)
			}
			if got := p.NewReplicaSetSizes(); !slices.Equal(got, tc.wantNew) {
				t.Errorf("new ReplicaSet sizes %v, want %v", got, tc.wantNew)
			}
			if tc.wantOld != nil {
				if got := p.OldReplicaSetSizes(0); !slices.Equal(got, tc.wantOld) {
					t.Errorf("old ReplicaSet sizes %v, want %v", got, tc.wantOld)
				}
			}
			if p.PeakPods > 25 || p.MinAvailable < 15 {
				t.Errorf("peak %d, min available %d; bounds 25 and 15", p.PeakPods, p.MinAvailable)
			}
		})
	}
	// A partition at or above replicas is no partition.
	if p := partitionedPlan(t, newDeployment(20, surge, unavailable), "100%"); !p.Complete || p.Partitioned {
		t.Errorf("100%%: complete %v, partitioned %v (%s)", p.Complete, p.Partitioned, p.Stopped)
	}
}

// TestSimulateVictimsFromPods: given the cluster's pods, the old ReplicaSet
// loses the pods the ReplicaSet controller's own ranking picks (RS-14): the
// not-Ready one first, then, between nodes holding as many of the
// Deployment's pods, the one Ready for the shortest time ("b"), not the
// newest by creation ("a", which a model of RS-14 by age alone would pick).
func TestSimulateVictimsFromPods(t *testing.T) {
	d := newDeployment(4, intstr.FromInt32(0), intstr.FromInt32(2))
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs.UID = "old-uid"
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pod := func(name, node string, created, ready time.Duration) *v1.Pod {
		p := newPod(rs)
		p.Name, p.UID, p.Spec.NodeName = name, types.UID(name+"-uid"), node
		p.CreationTimestamp = metav1.NewTime(now.Add(-created))
		p.Status.Phase = v1.PodRunning
		if ready > 0 {
			setReady(p, now.Add(-ready))
		}
		return p
	}
	pods := []*v1.Pod{
		pod("a", "node-1", time.Minute, 50*time.Second), // the newest
		pod("b", "node-1", time.Hour, 10*time.Second),   // Ready for the shortest time
		pod("c", "node-2", 2*time.Hour, 0),              // not Ready
		pod("d", "node-2", 3*time.Hour, 2*time.Hour),    // Ready longest
	}
	next := d.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	p, err := Simulate(context.Background(), State{Deployment: next, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: pods, Now: now}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) == 0 || !slices.Equal(p.Steps[0].DeletedPods, []string{"b", "c"}) {
		t.Fatalf("first step's victims = %v, want [b c] (steps %+v)", p.Steps[0].DeletedPods, p.Steps)
	}
	if !p.Complete {
		t.Errorf("plan not complete: %s", p.Stopped)
	}
}

// TestSimulateNotReadyPodTurnsReady: an existing pod that is not Ready (a
// Ready=False condition) turns Ready PodStartup after its creation in the
// simulation, and the rollout completes (its condition is replaced, not
// added to, so the simulated kubelet sees it Ready).
func TestSimulateNotReadyPodTurnsReady(t *testing.T) {
	d := newDeployment(2, intstr.FromInt32(1), intstr.FromInt32(0))
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs.UID = "old-uid"
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var pods []*v1.Pod
	for i, ready := range []bool{true, false} {
		p := newPod(rs)
		p.Name, p.UID, p.Spec.NodeName = fmt.Sprint("p", i), types.UID(fmt.Sprint("p", i)), "node-1"
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		p.Status.Phase = v1.PodRunning
		if ready {
			setReady(p, now.Add(-time.Minute))
		} else {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(now)}}
		}
		pods = append(pods, p)
	}
	next := d.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	p, err := Simulate(context.Background(), State{Deployment: next, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: pods, Now: now}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Complete || p.EstimatedSeconds > 10 {
		t.Fatalf("plan complete %v after %v s (%s); want complete within seconds", p.Complete, p.EstimatedSeconds, p.Stopped)
	}
}

// EX-5 through the simulated controllers: 10 replicas, steps 20% → pause 12 s → 50% → pause {}: the new
// ReplicaSet grows to 2, holds there for the 12 s pause once its pods are available, grows to 5 and is held
// there until promoted; maxSurge and maxUnavailable hold throughout.
func TestSimulateRolloutSteps(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(10, surge, unavailable)
	steps := "- setWeight: 20\n- pause: {duration: 12s}\n- setWeight: 50\n- pause: {}\n"
	p := simulateImageChange(t, d, map[string]string{rolloutstate.RolloutStepsAnnotation: steps}, Config{PodStartup: 2 * time.Second})
	if p.Complete || p.Verdict != rolloutstate.PhaseHeld || !strings.Contains(p.Stopped, "held by rollout step 4 of 4 (pause until promoted): 5 of 10 pods updated") {
		t.Fatalf("plan complete %v, verdict %s, stopped %q; want held at step 4", p.Complete, p.Verdict, p.Stopped)
	}
	if got := p.NewReplicaSetSizes(); !slices.Equal(got, []int32{2, 5}) {
		t.Errorf("new ReplicaSet sizes %v, want [2 5]", got)
	}
	var at2, at5 float64 = -1, -1
	for _, s := range p.Steps {
		if s.NewReplicas == 2 && at2 < 0 {
			at2 = s.Seconds
		}
		if s.NewReplicas == 5 && at5 < 0 {
			at5 = s.Seconds
		}
	}
	// 2 pods ready after 2 s, then 12 s of pause: 5 not before 14 s.
	if at2 < 0 || at5-at2 < 14 {
		t.Errorf("new ReplicaSet at 2 from %.0f s, at 5 from %.0f s; want 14 s or more between", at2, at5)
	}
	if p.PeakPods > 13 || p.MinAvailable < 8 {
		t.Errorf("peak %d, min available %d; bounds 13 and 8", p.PeakPods, p.MinAvailable)
	}
}
