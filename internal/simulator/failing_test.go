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

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// stuckNow is the wall-clock time of the stuck Deployments below.
var stuckNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// Ways a pod fails (failing.go).
const (
	imagePull = "ImagePullBackOff"
	crashLoop = "CrashLoopBackOff"
	// neverReady: Running, its container running, not Ready for a minute.
	neverReady = "never-ready"
)

// clusterPod returns pod name of rs as the cluster has it at stuckNow, created a minute (age) before: Ready
// for that long (how ""), or failing as how says.
func clusterPod(rs *appsv1.ReplicaSet, name, how string) *v1.Pod {
	p := newPod(rs)
	p.Name, p.UID, p.Spec.NodeName = name, types.UID(name+"-uid"), "node-1"
	created := metav1.NewTime(stuckNow.Add(-time.Minute))
	p.CreationTimestamp, p.Status.StartTime = created, &created
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: created}}
	c := p.Spec.Containers[0]
	state := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: created}}
	switch how {
	case "":
		setReady(p, created.Time)
	case imagePull:
		p.Status.Phase = v1.PodPending
		state = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: how, Message: fmt.Sprintf("Back-off pulling image %q", c.Image)}}
	case crashLoop:
		state = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: how, Message: "back-off 5m0s restarting failed container"}}
	}
	if how != "" {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
			Reason: "ContainersNotReady", LastTransitionTime: created})
	}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: c.Name, Image: c.Image, State: state}}
	return p
}

// stuckState is the seed Deployment (20 replicas, 25%/25%) stuck on nginx:broken, as issue 44 found it:
// revision 2's ReplicaSet at 10 with every pod failing as how says, revision 1's (nginx:1.14.2) at 15, all
// Ready; the last progress 100 s before stuckNow, progressDeadlineSeconds 600. rollback opts it into EX-2
// with revision 1 recorded complete.
func stuckState(t *testing.T, how string, rollback bool) State {
	t.Helper()
	surge, unavailable := pct25()
	d := newDeployment(20, surge, unavailable)
	old, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "nginx:broken"
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2"}
	if rollback {
		d.Annotations[rolloutstate.RollbackOnProgressDeadlineAnnotation] = "true"
		d.Annotations[rolloutstate.CompleteRevisionAnnotation] = "1"
	}
	broken, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	old.UID, broken.UID = "old-uid", "broken-uid"
	old.Spec.Replicas, broken.Spec.Replicas = new(int32(15)), new(int32(10))
	old.Status = appsv1.ReplicaSetStatus{Replicas: 15, FullyLabeledReplicas: 15, ReadyReplicas: 15, AvailableReplicas: 15, ObservedGeneration: 1}
	broken.Status = appsv1.ReplicaSetStatus{Replicas: 10, FullyLabeledReplicas: 10, ObservedGeneration: 1}
	var pods []*v1.Pod
	for i := range 15 {
		pods = append(pods, clusterPod(old, fmt.Sprintf("old-%02d", i), ""))
	}
	for i := range 10 {
		pods = append(pods, clusterPod(broken, fmt.Sprintf("broken-%02d", i), how))
	}
	progressed := metav1.NewTime(stuckNow.Add(-100 * time.Second))
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 25, UpdatedReplicas: 10, ReadyReplicas: 15, AvailableReplicas: 15, UnavailableReplicas: 10,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: v1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: progressed, LastTransitionTime: progressed},
			{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: progressed, LastTransitionTime: progressed},
		}}
	return State{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, broken}, Pods: pods, Now: stuckNow}
}

// TestSimulateStuck (issue 44): a Deployment whose new pods fail (an image that cannot be pulled, a crash
// loop, never Ready) is planned as it is: no step counts them available, the plan does not complete, and
// Stuck names them with unavailable's reason, the progress deadline (600 s after the last progress, 100 s
// ago) and, opted into EX-2, the revision the controller then rolls back to.
func TestSimulateStuck(t *testing.T) {
	for _, tc := range []struct {
		name, how, reason string
		rollback          bool
	}{
		{name: "ImagePullBackOff", how: imagePull, reason: imagePull},
		{name: "CrashLoopBackOff", how: crashLoop, reason: crashLoop},
		{name: "never Ready", how: neverReady, reason: unavailable.NotReady},
		{name: "EX-2 opted in", how: imagePull, reason: imagePull, rollback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := stuckState(t, tc.how, tc.rollback)
			p, err := Simulate(context.Background(), from, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Complete || p.Stuck == nil || len(p.Stuck.ReplicaSets) != 1 {
				t.Fatalf("plan complete %v, stuck %+v, stopped %q; want stuck on the new ReplicaSet", p.Complete, p.Stuck, p.Stopped)
			}
			for i, s := range p.Steps {
				if s.MinAvailable > 15 {
					t.Errorf("step %d counts %d available; only the 15 old pods are: %+v", i+1, s.MinAvailable, s)
				}
			}
			rs := p.Stuck.ReplicaSets[0]
			if !rs.New || rs.Name != from.ReplicaSets[1].Name || len(rs.Groups) != 1 || rs.Groups[0].Reason != tc.reason || len(rs.Groups[0].Pods) != 10 {
				t.Errorf("failing ReplicaSet %+v; want the new one, 10 pods %s", rs, tc.reason)
			}
			wantStopped := fmt.Sprintf("will not complete without a change: 10 pods of the new ReplicaSet %s fail (%s)", rs.Name, tc.reason)
			if p.Stopped != wantStopped {
				t.Errorf("stopped %q, want %q", p.Stopped, wantStopped)
			}
			if p.Stuck.ProgressDeadlineSeconds != 600 || p.Stuck.DeadlineSeconds != 500 || p.Stuck.DeadlineExceeded ||
				!p.Stuck.Deadline.Time.Equal(stuckNow.Add(500*time.Second)) {
				t.Errorf("deadline %+v; want 600 s, passing 500 s from now", p.Stuck)
			}
			checkAutoRollback(t, p.Stuck.AutoRollback, tc.rollback, from.ReplicaSets[0].Name)
		})
	}
}

func checkAutoRollback(t *testing.T, got *AutoRollback, optedIn bool, target string) {
	t.Helper()
	switch {
	case !optedIn && got != nil:
		t.Errorf("auto rollback %+v without EX-2", got)
	case optedIn && (got == nil || got.FailedRevision != 2 || got.Revision != 1 || got.ReplicaSet != target || got.Skipped != ""):
		t.Errorf("auto rollback %+v; want revision 2 rolled back to 1 (%s)", got, target)
	}
}

// A change from a stuck Deployment (issue 44): to a new template, whose pods are assumed to start, or back
// to the template of revision 1, whose pods are Ready. Either completes; the broken pods never count
// available (before the change's new pods are, 1 s in, only the 15 old ones are), so the controller's first
// step scales their ReplicaSet to 0 (RU-12's cleanup of unhealthy replicas, which a simulation that let them
// turn Ready skipped).
func TestSimulateChangeAwayFromStuck(t *testing.T) {
	for _, tc := range []struct{ name, image string }{
		{"new template", "nginx:1.9.3"},
		{"back to revision 1", "nginx:1.14.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := stuckState(t, imagePull, false)
			from.Deployment.Spec.Template.Spec.Containers[0].Image = tc.image
			p, err := Simulate(context.Background(), from, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Complete || p.Stuck != nil {
				t.Fatalf("plan complete %v, stuck %+v, stopped %q; want complete", p.Complete, p.Stuck, p.Stopped)
			}
			for i, s := range p.Steps {
				if s.Seconds == 0 && s.MinAvailable > 15 {
					t.Errorf("step %d at 0 s counts %d available; only the 15 old pods are", i+1, s.MinAvailable)
				}
			}
			if tc.image == "nginx:1.14.2" && p.NewReplicaSet != from.ReplicaSets[0].Name {
				t.Errorf("new ReplicaSet %s, want revision 1's %s", p.NewReplicaSet, from.ReplicaSets[0].Name)
			}
			broken := slices.Index(p.OldReplicaSets, from.ReplicaSets[1].Name)
			if broken < 0 || len(p.Steps) == 0 || p.Steps[0].OldReplicas[broken] != 0 || len(p.Steps[0].DeletedPods) != 10 {
				t.Errorf("first step %+v of old ReplicaSets %v; want the broken one (%s) at 0, its 10 pods deleted", p.Steps[0], p.OldReplicaSets, from.ReplicaSets[1].Name)
			}
		})
	}
}

// The controller's next step for a stuck Deployment part-way (the broken ReplicaSet at 5, its pods failing;
// the old one at 15) grows the broken ReplicaSet to 10: the pods the simulation creates for it fail as its
// pods do (same template, same outcome), so the plan ends with 10 failing pods, 5 of them simulated.
func TestSimulateNewPodsOfAFailingTemplateFail(t *testing.T) {
	from := stuckState(t, imagePull, false)
	broken := from.ReplicaSets[1]
	broken.Spec.Replicas = new(int32(5))
	broken.Status.Replicas, broken.Status.FullyLabeledReplicas = 5, 5
	from.Pods = from.Pods[:20] // the 15 old pods and broken-00..04
	from.Deployment.Status.Replicas, from.Deployment.Status.UpdatedReplicas = 20, 5
	p, err := Simulate(context.Background(), from, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Complete || p.Stuck == nil || len(p.Steps) == 0 || p.Steps[len(p.Steps)-1].NewReplicas != 10 {
		t.Fatalf("plan complete %v, steps %+v, stopped %q; want the broken ReplicaSet grown to 10 and stuck", p.Complete, p.Steps, p.Stopped)
	}
	if p.MinAvailable != 15 {
		t.Errorf("min available %d, want 15 (the old pods)", p.MinAvailable)
	}
	g := p.Stuck.ReplicaSets[0].Groups
	if len(g) != 1 || g[0].Reason != imagePull || len(g[0].Pods) != 10 || !strings.Contains(g[0].Message, `"nginx:broken"`) {
		t.Fatalf("failing pods %+v; want 10 in ImagePullBackOff", g)
	}
	simulated := 0
	for _, name := range g[0].Pods {
		if strings.HasPrefix(name, broken.Name+"-") {
			simulated++
		}
	}
	if simulated != 5 {
		t.Errorf("%d simulated failing pods in %v, want 5", simulated, g[0].Pods)
	}
}

// One pod crash-looping among Ready ones of the same ReplicaSet (its node's fault, say) keeps failing, but
// does not make the template fail: scaled from 4 to 6, the ReplicaSet's two new pods start as usual. The
// rollout had completed (Progressing NewReplicaSetAvailable), so no progress deadline runs (ST-13).
func TestSimulateOnePodFailingAmongReady(t *testing.T) {
	d := newDeployment(4, intstr.FromInt32(1), intstr.FromInt32(0))
	rs, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs.UID = "rs-uid"
	rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 3, 3
	pods := []*v1.Pod{clusterPod(rs, "a", ""), clusterPod(rs, "b", ""), clusterPod(rs, "c", crashLoop), clusterPod(rs, "d", "")}
	done := metav1.NewTime(stuckNow.Add(-time.Hour))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue,
			Reason: rolloutstate.NewReplicaSetAvailable, LastUpdateTime: done, LastTransitionTime: done}}}
	d.Spec.Replicas = new(int32(6))
	p, err := Simulate(context.Background(), State{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: pods, Now: stuckNow}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Complete || p.Stuck == nil || len(p.Stuck.ReplicaSets) != 1 {
		t.Fatalf("plan complete %v, stuck %+v, stopped %q; want stuck on pod c", p.Complete, p.Stuck, p.Stopped)
	}
	g := p.Stuck.ReplicaSets[0].Groups
	if len(g) != 1 || g[0].Reason != crashLoop || !slices.Equal(g[0].Pods, []string{"c"}) {
		t.Errorf("failing pods %+v; want c alone, CrashLoopBackOff", g)
	}
	if len(p.Steps) == 0 || p.Steps[len(p.Steps)-1].NewReplicas != 6 {
		t.Errorf("steps %+v; want the ReplicaSet scaled to 6", p.Steps)
	}
	if p.Stuck.ProgressDeadlineSeconds != 600 || p.Stuck.Deadline != nil {
		t.Errorf("deadline %+v; want none running after completion", p.Stuck)
	}
	if !strings.HasSuffix(p.Stopped, "1 pod of the new ReplicaSet "+rs.Name+" fails (CrashLoopBackOff)") {
		t.Errorf("stopped %q", p.Stopped)
	}
}

// An evicted pod (phase Failed, its Ready condition left True) is not counted available, nor named failing:
// the ReplicaSet controller counts it out and replaces it, and the replacement starts as usual.
func TestSimulateEndedPodIsNotAvailable(t *testing.T) {
	from := stuckState(t, imagePull, false)
	evicted := from.Pods[0]
	evicted.Status.Phase, evicted.Status.Reason = v1.PodFailed, "Evicted"
	p, err := Simulate(context.Background(), from, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.MinAvailable != 14 || p.Stuck == nil || len(p.Stuck.ReplicaSets) != 1 || !p.Stuck.ReplicaSets[0].New {
		t.Errorf("min available %d, stuck %+v; want 14 (the evicted pod out) and only the new ReplicaSet's pods failing", p.MinAvailable, p.Stuck)
	}
}
