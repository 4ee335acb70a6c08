package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// issueSteps are issue 46's steps: 20% → pause 12 s → 50% → pause until promoted.
const issueSteps = "- setWeight: 20\n- pause: {duration: 12s}\n- setWeight: 50\n- pause: {}\n"

// sizeEvent is one ReplicaSet as a watch delivered it: when, its spec.replicas and available replicas.
type sizeEvent struct {
	at                  time.Time
	replicas, available int32
}

// rsTimeline records, from an independent watch of a namespace's ReplicaSets, each ReplicaSet's size and
// availability every time either changes, with the time the event arrived.
type rsTimeline struct {
	mu     sync.Mutex
	events map[string][]sizeEvent
}

func watchTimeline(ctx context.Context, t *testing.T, ns string) *rsTimeline {
	t.Helper()
	w, err := env.Client.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	tl := &rsTimeline{events: map[string][]sizeEvent{}}
	go func() {
		for ev := range w.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok || rs.Spec.Replicas == nil {
				continue
			}
			e := sizeEvent{at: time.Now(), replicas: *rs.Spec.Replicas, available: rs.Status.AvailableReplicas}
			tl.mu.Lock()
			s := tl.events[rs.Name]
			if len(s) == 0 || s[len(s)-1].replicas != e.replicas || s[len(s)-1].available != e.available {
				tl.events[rs.Name] = append(s, e)
			}
			tl.mu.Unlock()
		}
	}()
	return tl
}

// of returns the events of ReplicaSet name so far.
func (tl *rsTimeline) of(name string) []sizeEvent {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]sizeEvent(nil), tl.events[name]...)
}

// first returns the first event of name for which cond holds, ok false if none.
func (tl *rsTimeline) first(name string, cond func(sizeEvent) bool) (sizeEvent, bool) {
	for _, e := range tl.of(name) {
		if cond(e) {
			return e, true
		}
	}
	return sizeEvent{}, false
}

// planSizes runs `kubedeploy rollout plan deploy/name --image name=image -o json` (harness.RolloutPlan) and
// returns the new ReplicaSet's sizes it plans (simulator.Plan.NewReplicaSetSizes).
func planSizes(ctx context.Context, t *testing.T, ns, name, image string) []int32 {
	t.Helper()
	p := harness.RolloutPlan(ctx, t, env.ControlPlane.KubeconfigPath(), ns, name, "--image", name+"="+image, "--pod-startup", "1")
	t.Logf("rollout plan: new ReplicaSet sizes %v; %s", p.NewReplicaSetSizes(), p.Stopped)
	return p.NewReplicaSetSizes()
}

// waitEventContaining waits for an event of ns/name with reason whose message contains part.
func waitEventContaining(t *testing.T, ns, name, reason, part string) {
	t.Helper()
	harness.Eventually(t, rolloutTimeout, fmt.Sprintf("event %s with %q", reason, part), func(ctx context.Context) (bool, error) {
		for _, m := range eventMessages(ctx, t, ns, name, reason) {
			if strings.Contains(m, part) {
				return true, nil
			}
		}
		return false, nil
	})
}

// heldAtStep waits until ns/name is held by pause step (1-based) of its steps with n pods updated, and returns it.
func heldAtStep(t *testing.T, ns, name string, step int, n int32) *appsv1.Deployment {
	t.Helper()
	return waitDeployment(t, ns, name, "held at step "+strconv.Itoa(step), func(d *appsv1.Deployment) bool {
		c := condition(d, appsv1.DeploymentProgressing)
		return observed(d) && c != nil && c.Reason == rolloutstate.RolloutStepPaused && d.Status.UpdatedReplicas == n &&
			strings.Contains(c.Message, "held by rollout step "+strconv.Itoa(step)+" of")
	})
}

// checkStepSizes checks, from the independent watch tl, that the new ReplicaSet newRS of TestRolloutSteps held
// at 2 for at least the 12 s pause after its 2 pods were available, never went past 5, and was given exactly the
// sizes `rollout plan` predicted (planned) up to the hold.
func checkStepSizes(t *testing.T, tl *rsTimeline, newRS string, planned []int32) {
	t.Helper()
	avail2, ok := tl.first(newRS, func(e sizeEvent) bool { return e.replicas == 2 && e.available == 2 })
	grew, ok2 := tl.first(newRS, func(e sizeEvent) bool { return e.replicas > 2 })
	// The pause starts when the controller's cache shows the pods available; this watch may see that status a
	// little later than the controller did, hence the 250 ms allowed for the two watches' delivery.
	if !ok || !ok2 || grew.at.Sub(avail2.at) < 12*time.Second-250*time.Millisecond {
		t.Fatalf("new ReplicaSet %s: 2 available at %v, grew past 2 at %v (want 12 s or more later); events %+v", newRS, avail2.at, grew.at, tl.of(newRS))
	}
	t.Logf("new ReplicaSet %s: 2 available at %s, grew past 2 %.1fs later (pause 12 s)", newRS, avail2.at.Format("15:04:05.000"), grew.at.Sub(avail2.at).Seconds())
	var sizes []int32
	for _, e := range tl.of(newRS) {
		if e.replicas > 2 && e.at.Before(grew.at) || e.replicas > 5 {
			t.Fatalf("new ReplicaSet %s went to %d before its step: %+v", newRS, e.replicas, tl.of(newRS))
		}
		if len(sizes) == 0 || sizes[len(sizes)-1] != e.replicas {
			sizes = append(sizes, e.replicas)
		}
	}
	// `rollout plan`, run before the change, predicted the sizes the controller then wrote up to the hold.
	if !slices.Equal(sizes, planned) {
		t.Errorf("new ReplicaSet sizes %v up to the hold, rollout plan said %v", sizes, planned)
	}
}

// Issue 46 Done-when, EX-5 on the real controllers: 10 replicas (25%/25%), steps 20% → pause 12 s → 50% →
// pause {}. An independent watch shows the new ReplicaSet held at 2 for at least 12 s after its 2 pods are
// available, then at 5 until `kubedeploy rollout promote`, then the rollout completes; the generation never
// changes from the image change to completion (the controller writes no spec); the bounds hold throughout.
// Then `kubedeploy rollout abort` during a hold of the next rollout rolls back to the previous image with
// kubedeploy.io/failed-revision set and the Warning event.
func TestRolloutSteps(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	const name = "web"
	d := harness.NewDeployment(ns, name, 10, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: issueSteps}
	createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout) // a first rollout has no steps

	planned := planSizes(ctx, t, ns, name, "nginx:1.9.3")
	tl := watchTimeline(ctx, t, ns)
	w := harness.WatchRollout(t, env.Client, ns, name, harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	setImage(ctx, t, ns, name, name, "nginx:1.9.3")
	changed := waitDeployment(t, ns, name, "the image change observed", observed)
	held := heldAtStep(t, ns, name, 4, 5)
	newRS := newReplicaSetName(ctx, t, held, "nginx:1.9.3")
	checkStepSizes(t, tl, newRS, planned)
	// Held at 5 until promoted: nothing moves meanwhile.
	versions := replicaSetVersions(ctx, t, held)
	time.Sleep(3 * time.Second)
	if now := replicaSetVersions(ctx, t, held); now[newRS] != versions[newRS] {
		t.Fatalf("the new ReplicaSet was written while held at the untimed pause")
	}
	out, err := runRollout(ctx, ns, "promote", "deploy/"+name)
	if err != nil || !strings.Contains(out, "promoted: step 4 of 4 (pause until promoted) of revision 2 ends") {
		t.Fatalf("rollout promote: %v\n%s", err, out)
	}
	done := harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	if done.Generation != changed.Generation {
		t.Errorf("generation %d at completion, %d right after the image change: the spec was written", done.Generation, changed.Generation)
	}
	w.Stop()
	w.Check(3)
	waitEventContaining(t, ns, name, deployment.RolloutStepStarted, "Revision 2: every rollout step is done")

	// Abort during the timed pause of the next rollout: back to nginx:1.9.3, revision 2's template.
	setImage(ctx, t, ns, name, name, "nginx:1.9.4")
	heldAtStep(t, ns, name, 2, 2)
	if out, err := runRollout(ctx, ns, "abort", "deploy/"+name); err != nil || !strings.Contains(out, "abort of revision 3 requested") {
		t.Fatalf("rollout abort: %v\n%s", err, out)
	}
	back := waitDeployment(t, ns, name, "rolled back from revision 3", func(d *appsv1.Deployment) bool {
		return d.Annotations[rolloutstate.FailedRevisionAnnotation] == "3" && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.9.3"
	})
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	waitEventContaining(t, ns, name, deployment.RolloutAborted, "Aborted the rollout of revision 3 as asked (kubedeploy.io/rollout-abort), rolling back to revision 2")
	if back.Annotations[rolloutstate.RevisionAnnotation] != "4" {
		t.Errorf("revision after the abort %q, want 4", back.Annotations[rolloutstate.RevisionAnnotation])
	}
}

// EX-5: invalid steps hold a new rollout at 0 new pods with Progressing InvalidRolloutSteps and a Warning event
// naming the fault, until fixed; fixed, the steps run.
func TestInvalidRolloutStepsHold(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	const name = "typo"
	d := harness.NewDeployment(ns, name, 4, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: "- setWeigth: 50\n"}
	createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	setImage(ctx, t, ns, name, name, "nginx:1.9.3")
	held := waitDeployment(t, ns, name, "held by invalid steps", func(d *appsv1.Deployment) bool {
		return observed(d) && hasReason(d, appsv1.DeploymentProgressing, rolloutstate.InvalidRolloutSteps)
	})
	if held.Status.UpdatedReplicas != 0 {
		t.Errorf("%d pods updated under invalid steps, want 0", held.Status.UpdatedReplicas)
	}
	waitEventContaining(t, ns, name, deployment.InvalidRolloutSteps, "kubedeploy.io/rollout-steps: not a list of steps")
	setAnnotation(ctx, t, ns, name, rolloutstate.RolloutStepsAnnotation, "- setWeight: 50\n")
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
}
