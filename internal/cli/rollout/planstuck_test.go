package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controlplane/apidefaults"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// clusterNow is the wall-clock time of the cluster objects below.
var clusterNow = time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)

// failure makes a pod fail in one way (nil: Ready).
type failure func(p *v1.Pod, created metav1.Time)

// waitingOn fails a pod's container with the kubelet's waiting reason, Pending for image pulls.
func waitingOn(reason, message string) failure {
	return func(p *v1.Pod, _ metav1.Time) {
		if strings.Contains(reason, "Image") {
			p.Status.Phase = v1.PodPending
		}
		p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}}
	}
}

// neverReady leaves a pod Running and its container running, not Ready since it started a minute ago.
func neverReady(*v1.Pod, metav1.Time) {}

// examplePod returns a pod of rs created a minute before clusterNow, Ready since then, or failing as fail
// makes it.
func examplePod(rs *appsv1.ReplicaSet, name string, fail failure) *v1.Pod {
	created := metav1.NewTime(clusterNow.Add(-time.Minute))
	t := rs.Spec.Template.DeepCopy()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, UID: types.UID(name), Labels: t.Labels, CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: t.Spec,
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &created,
			Conditions:        []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: created}},
			ContainerStatuses: []v1.ContainerStatus{{Name: t.Spec.Containers[0].Name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: created}}}}},
	}
	p.Spec.NodeName = "node-1"
	ready := v1.ConditionTrue
	if fail != nil {
		ready = v1.ConditionFalse
		fail(p, created)
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: ready, LastTransitionTime: created})
	return p
}

// exampleReplicaSet returns the ReplicaSet the controller makes for d's template, at revision rev, uid, with
// size replicas, ready of them Ready (and available), and their pods ("<prefix>-00", ...), the others
// failing as fail makes them.
func exampleReplicaSet(t *testing.T, d *appsv1.Deployment, rev string, uid types.UID, size, ready int32, prefix string, fail failure) (*appsv1.ReplicaSet, []*v1.Pod) {
	t.Helper()
	d = d.DeepCopy()
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: rev}
	rs, err := simulator.SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs.UID, rs.Spec.Replicas = uid, new(size)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: size, FullyLabeledReplicas: size, ReadyReplicas: ready, AvailableReplicas: ready, ObservedGeneration: 1}
	var pods []*v1.Pod
	for i := range size {
		var f failure
		if i >= ready {
			f = fail
		}
		pods = append(pods, examplePod(rs, fmt.Sprintf("%s-%02d", prefix, i), f))
	}
	return rs, pods
}

// exampleAt returns the example Deployment (20 replicas, 25%/25%, defaulted as the API server would) at
// generation 2 on image, its revision 2 rolling out from revision 1 (nginx:1.9): revision 2's ReplicaSet at
// newSize with newReady Ready pods, the others failing as fail makes them, revision 1's at 20-newSize+surge
// (surged: the new one's extra pods), all Ready; the status counted from them, its Progressing condition
// reason since 100 s before clusterNow; annotations added to the Deployment's.
func exampleAt(t *testing.T, image string, newSize, newReady, oldSize int32, fail failure, reason string, annotations map[string]string) simulator.State {
	t.Helper()
	d := exampleDeployment(t)
	apidefaults.Deployment(d)
	d.Namespace, d.UID = "default", "d-uid"
	old, oldPods := exampleReplicaSet(t, d, "1", "old-uid", oldSize, oldSize, "old", nil)
	d.Spec.Template.Spec.Containers[0].Image = image
	cur, curPods := exampleReplicaSet(t, d, "2", "new-uid", newSize, newReady, "new", fail)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2"}
	for k, v := range annotations {
		d.Annotations[k] = v
	}
	progressed := metav1.NewTime(clusterNow.Add(-100 * time.Second))
	status := v1.ConditionTrue
	if reason == rolloutstate.InvalidRolloutPartition {
		status = v1.ConditionFalse
	}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: newSize + oldSize, UpdatedReplicas: newSize,
		ReadyReplicas: newReady + oldSize, AvailableReplicas: newReady + oldSize, UnavailableReplicas: max(0, 20-newReady-oldSize),
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason,
			LastUpdateTime: progressed, LastTransitionTime: progressed}}}
	return simulator.State{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old, cur}, Pods: append(oldPods, curPods...), Now: clusterNow}
}

// stuckExample is issue 44's stuck Deployment: nginx:broken, 10 new pods failing as fail makes them, 15 old
// ones available.
func stuckExample(t *testing.T, fail failure, annotations map[string]string) simulator.State {
	return exampleAt(t, "nginx:broken", 10, 0, 15, fail, "ReplicaSetUpdated", annotations)
}

// planText runs the plan of from (with --image settings) as `rollout plan deploy/NAME` does on a cluster
// and returns the table, the -o json Plan, and the error the command returns.
func planText(t *testing.T, from simulator.State, images ...string) (string, simulator.Plan, error) {
	t.Helper()
	var out, js, errOut bytes.Buffer
	var err error
	for _, output := range []string{"table", "json"} {
		o := &planOptions{images: images, podStartup: 1, output: output}
		f := from
		f.Deployment = from.Deployment.DeepCopy()
		r, rerr := o.report(context.Background(), f, rolloutstate.VerdictOf(from.Deployment, from.ReplicaSets))
		if rerr != nil {
			t.Fatal(rerr)
		}
		w := &out
		if output == "json" {
			w = &js
		}
		err = o.write(w, &errOut, r)
	}
	var p simulator.Plan
	if jerr := json.Unmarshal(js.Bytes(), &p); jerr != nil {
		t.Fatalf("-o json: %v\n%s", jerr, js.String())
	}
	return out.String(), p, err
}

// TestPlanStuck (issue 44, item 3): `rollout plan` of a Deployment whose new pods fail does not promise
// completion: it says the rollout will not complete without a change, names the pods and why (rollout
// watch's why-line), when the progress deadline passes and, opted into EX-2, the revision the controller
// rolls back to or why it will not; -o json carries the same facts.
func TestPlanStuck(t *testing.T) {
	optIn := map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true"}
	recorded := map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true", rolloutstate.CompleteRevisionAnnotation: "1"}
	for _, tc := range []struct {
		name        string
		fail        failure
		annotations map[string]string
		why         string // the why-line after the ReplicaSet's name
		then        string // the line after the deadline's ("": none)
	}{
		{"ImagePullBackOff", waitingOn("ImagePullBackOff", `Back-off pulling image "nginx:broken"`), nil,
			`10 ImagePullBackOff: new-00, new-01, new-02, new-03, new-04, new-05, new-06, new-07, new-08, new-09 (container nginx-deployment: Back-off pulling image "nginx:broken")`, ""},
		{"CrashLoopBackOff", waitingOn("CrashLoopBackOff", "back-off 5m0s restarting failed container"), nil,
			"10 CrashLoopBackOff: new-00, new-01, new-02, new-03, new-04, new-05, new-06, new-07, new-08, new-09 (container nginx-deployment: back-off 5m0s", ""},
		{"never Ready", neverReady, nil, "10 NotReady: new-00, new-01, new-02, new-03, new-04, new-05, new-06, new-07, new-08, new-09 (not Ready after 1m0s)", ""},
		{"EX-2 opted in", waitingOn("ErrImagePull", "pull access denied"), recorded, "10 ErrImagePull: new-00,",
			`Then the controller rolls it back to revision 1 (ReplicaSet OLD): kubedeploy.io/rollback-on-progress-deadline is "true".`},
		{"EX-2 opted in, no complete revision", waitingOn("ImagePullBackOff", ""), optIn, "10 ImagePullBackOff: new-00,",
			`kubedeploy.io/rollback-on-progress-deadline is "true", but the controller will not roll it back: no complete revision is recorded`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := stuckExample(t, tc.fail, tc.annotations)
			oldRS, newRS := from.ReplicaSets[0].Name, from.ReplicaSets[1].Name
			out, p, err := planText(t, from)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				"deployment/nginx-deployment: 20 replicas, RollingUpdate (maxSurge 25%, maxUnavailable 25%)",
				"Now: progressing: 10 of 20 pods updated, 15 available",
				"No step: the rollout will not complete without a change: 10 pods of the new ReplicaSet " + newRS + " fail (",
				"  new " + newRS + ": " + tc.why,
				"Its progress deadline (600s without progress) passes in about 8m20s, at 2026-11-27T22:08:20Z: Progressing turns False with reason ProgressDeadlineExceeded.",
				strings.ReplaceAll(tc.then, "OLD", oldRS),
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("plan lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "complete after") || strings.Contains(out, "STEP") {
				t.Errorf("plan promises steps or completion:\n%s", out)
			}
			checkStuckJSON(t, p, newRS, tc.annotations != nil, oldRS)
		})
	}
}

// checkStuckJSON checks that -o json says what the table says of a stuck plan.
func checkStuckJSON(t *testing.T, p simulator.Plan, newRS string, optedIn bool, target string) {
	t.Helper()
	s := p.Stuck
	if p.Complete || s == nil || len(s.ReplicaSets) != 1 || s.ReplicaSets[0].Name != newRS || !s.ReplicaSets[0].New ||
		s.ReplicaSets[0].Pods() != 10 || len(s.ReplicaSets[0].Groups[0].Pods) != 10 {
		t.Fatalf("json: complete %v, stuck %+v", p.Complete, s)
	}
	if s.ProgressDeadlineSeconds != 600 || s.DeadlineSeconds != 500 || !s.Deadline.Equal(&metav1.Time{Time: clusterNow.Add(500 * time.Second)}) {
		t.Errorf("json deadline: %+v", s)
	}
	switch a := s.AutoRollback; {
	case !optedIn && a != nil, optedIn && a == nil:
		t.Errorf("json auto rollback %+v, opted in %v", a, optedIn)
	case a != nil && a.Skipped == "" && (a.FailedRevision != 2 || a.Revision != 1 || a.ReplicaSet != target):
		t.Errorf("json auto rollback %+v; want 2 to 1 (%s)", a, target)
	}
}

// A change away from the stuck template, to a new one (its pods assumed to start) or back to revision 1's
// (Ready pods), completes; "Now, before the change" says the counts are the current template's.
func TestPlanChangeAwayFromStuck(t *testing.T) {
	for _, image := range []string{"nginx:1.9.3", "nginx:1.9"} {
		t.Run(image, func(t *testing.T) {
			from := stuckExample(t, waitingOn("ImagePullBackOff", ""), nil)
			out, p, err := planText(t, from, "nginx-deployment="+image)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Complete || p.Stuck != nil || !strings.Contains(out, "Now, before the change: progressing: 10 of 20 pods updated, 15 available") ||
				!strings.Contains(out, "complete after about") || strings.Contains(out, "will not complete") {
				t.Errorf("plan:\n%s", out)
			}
		})
	}
}

// Counts in words (issue 44: "1 steps"): one step, one replica, one pod.
func TestPlanCountsInWords(t *testing.T) {
	var out bytes.Buffer
	next := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	p := &simulator.Plan{Deployment: "web", Strategy: appsv1.RecreateDeploymentStrategyType, Replicas: 1, NewReplicaSet: "web-2",
		OldReplicaSets: []string{"web-1"}, PeakPods: 1, MinAvailable: 0, Complete: true, EstimatedSeconds: 1,
		Steps: []simulator.Step{{NewReplicas: 1, NewReplicaSetExists: true, OldReplicas: []int32{0}, MaxTotal: 1}}}
	if err := printPlan(&out, planReport{next: next, plan: p}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deployment/web: 1 replica, Recreate\n", "\n1 step; at most 1 pod, at least 0 available; complete after about 1s.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
}

// An invalid partition ("abc", EX-1) on a Deployment held part-way at 5 of 20: planned as it is, the plan
// says what its Now line says (5 of 20 updated, no step); planned with a new image, the plan's end is the
// new template's 0 of 20 (the controller creates its ReplicaSet at 0 and holds), and the Now line, 5 of 20,
// is labelled as before the change. Both exit with ErrInvalidPolicy.
func TestPlanInvalidPartitionNowAndEnd(t *testing.T) {
	from := exampleAt(t, "nginx:1.9.3", 5, 5, 15, nil, rolloutstate.InvalidRolloutPartition,
		map[string]string{rolloutstate.RolloutPartitionAnnotation: "abc"})
	out, p, err := planText(t, from)
	if !errors.Is(err, ErrInvalidPolicy) || p.Verdict != rolloutstate.PhaseInvalid || !strings.Contains(p.Stopped, ": 5 of 20 pods updated") {
		t.Errorf("no change: error %v, verdict %q, stopped %q", err, p.Verdict, p.Stopped)
	}
	if !strings.Contains(out, "\nNow: stuck on an invalid value: ") || !strings.Contains(out, "holds where it is: 5 of 20 pods updated\nNo step: the controllers take none from here.\n") {
		t.Errorf("no change:\n%s", out)
	}
	out, p, err = planText(t, from, "nginx-deployment=nginx:1.9.4")
	if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(p.Stopped, ": 0 of 20 pods updated") {
		t.Errorf("new image: error %v, stopped %q", err, p.Stopped)
	}
	if !strings.Contains(out, "\nNow, before the change: stuck on an invalid value: ") || !strings.Contains(out, ": 5 of 20 pods updated\nSTEP") ||
		!strings.Contains(out, "1 step; at most 20 pods, at least 20 available; not complete: stuck on an invalid value: ") {
		t.Errorf("new image:\n%s", out)
	}
}
