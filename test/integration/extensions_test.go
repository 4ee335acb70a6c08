package integration

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The tests in this file run the opt-in extensions of spec section
// "Extensions" (issue 12) on the real controllers.

// setAnnotation sets (or, with value "", removes) annotation key on
// Deployment ns/name with a merge patch, as `kubectl annotate` does.
func setAnnotation(ctx context.Context, t *testing.T, ns, name, key, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating %s/%s %s=%q: %v", ns, name, key, value, err)
	}
}

// heldAt waits for ns/name to be held by its partition with the new
// ReplicaSet (the one with image) at n replicas, all available, and the old
// ones at replicas − n; it returns the Deployment.
func heldAt(ctx context.Context, t *testing.T, ns, name, image string, n, replicas int32) *appsv1.Deployment {
	t.Helper()
	return waitDeployment(t, ns, name, fmt.Sprintf("held at %d of %d on %s", n, replicas, image), func(d *appsv1.Deployment) bool {
		if !observed(d) || !hasReason(d, appsv1.DeploymentProgressing, rolloutstate.RolloutPartitioned) ||
			d.Status.UpdatedReplicas != n || d.Status.AvailableReplicas != replicas {
			return false
		}
		newN, oldN := splitSizes(ctx, t, d, image)
		return newN == n && oldN == replicas-n
	})
}

// splitSizes returns the spec.replicas of d's ReplicaSet with image and the
// sum of the others'.
func splitSizes(ctx context.Context, t *testing.T, d *appsv1.Deployment, image string) (newN, oldN int32) {
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			newN += *rs.Spec.Replicas
		} else {
			oldN += *rs.Spec.Replicas
		}
	}
	return newN, oldN
}

// Issue 12 Done-when, EX-1: partition 5 on the seed's 20-replica Deployment
// (25%/25%): set image → the new ReplicaSet reaches 5 available and stays
// there for more than 2 × progressDeadlineSeconds with reason
// RolloutPartitioned, the bounds watched at every ReplicaSet change;
// removing the annotation completes the rollout. Then partition "50%" holds
// a new rollout at 10, and after a scale 20 → 40 at 20.
func TestRolloutPartition(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	const name, deadline = "nginx-deployment", 4
	d := harness.NewDeployment(ns, name, 20, "nginx:1.9")
	d.Spec.ProgressDeadlineSeconds = new(int32(deadline))
	d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: "5"}
	d = createDeployment(ctx, t, d)
	// A first rollout has no old template to keep pods on: it completes.
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)

	w := harness.WatchRollout(t, env.Client, ns, name, harness.Bounds{MaxTotal: 25, MinAvailable: 15})
	setImage(ctx, t, ns, name, name, "nginx:1.9.3")
	held := heldAt(ctx, t, ns, name, "nginx:1.9.3", 5, 20)
	if c := condition(held, appsv1.DeploymentProgressing); c.Message != fmt.Sprintf(`ReplicaSet %q has 5 of 20 pods updated, held by kubedeploy.io/rollout-partition.`, newReplicaSetName(ctx, t, held, "nginx:1.9.3")) {
		t.Errorf("Progressing message %q", c.Message)
	}
	// Held for more than twice the deadline: nothing moves, nothing fails.
	// The test waits until the deadline would have passed twice (the
	// scenario, not an assertion), then causes a sync (pokeAndWaitSynced)
	// and reads what it decided: still held, and no ReplicaSet written
	// since the hold began (their resourceVersions unchanged, from when the
	// old pods' termination has been counted).
	waitReplicaSets(t, held, "settled: no pod terminating", func(rss []appsv1.ReplicaSet) bool {
		for _, rs := range rss {
			if rs.Status.ObservedGeneration < rs.Generation || rs.Status.Replicas != *rs.Spec.Replicas ||
				rs.Status.TerminatingReplicas != nil && *rs.Status.TerminatingReplicas != 0 {
				return false
			}
		}
		return true
	})
	versions := replicaSetVersions(ctx, t, held)
	waitPastCondition(ctx, t, held, 2*deadline*time.Second)
	held = pokeAndWaitSynced(ctx, t, ns, name)
	if !hasReason(held, appsv1.DeploymentProgressing, rolloutstate.RolloutPartitioned) || held.Status.UpdatedReplicas != 5 {
		t.Fatalf("not held any more after twice the deadline: %+v", held.Status)
	}
	if now := replicaSetVersions(ctx, t, held); !maps.Equal(now, versions) {
		t.Fatalf("ReplicaSets written while held: resourceVersions %v, were %v", now, versions)
	}
	setAnnotation(ctx, t, ns, name, rolloutstate.RolloutPartitionAnnotation, "")
	waitRevision(t, ns, name, "2")
	w.Stop()
	w.Check(4)

	// "50%": a new rollout holds at 10; scaled to 40 it holds at 20.
	setAnnotation(ctx, t, ns, name, rolloutstate.RolloutPartitionAnnotation, "50%")
	w = harness.WatchRollout(t, env.Client, ns, name, harness.Bounds{MaxTotal: 25, MinAvailable: 15})
	setImage(ctx, t, ns, name, name, "nginx:1.9.4")
	heldAt(ctx, t, ns, name, "nginx:1.9.4", 10, 20)
	w.Stop()
	w.Check(2)
	scaleDeployment(ctx, t, ns, name, 40)
	heldAt(ctx, t, ns, name, "nginx:1.9.4", 20, 40)
}

// replicaSetVersions returns the resourceVersion of each ReplicaSet d owns,
// by name.
func replicaSetVersions(ctx context.Context, t *testing.T, d *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		out[rs.Name] = rs.ResourceVersion
	}
	return out
}

// waitPastCondition returns once span (plus 1 s, the condition's time being
// whole seconds) has passed since d's Progressing condition was last
// updated (the embedded control plane shares this process's clock): the
// time a deadline test must let pass, which no fake clock can stand in for
// on a real cluster. It is the scenario's pacing, never a pass/fail check.
func waitPastCondition(ctx context.Context, t *testing.T, d *appsv1.Deployment, span time.Duration) {
	t.Helper()
	c := condition(d, appsv1.DeploymentProgressing)
	if c == nil {
		t.Fatalf("%s has no Progressing condition", d.Name)
	}
	select {
	case <-time.After(time.Until(c.LastUpdateTime.Add(span + time.Second))):
	case <-ctx.Done():
		t.Fatalf("waiting for %v past the Progressing condition: %v", span, ctx.Err())
	}
}

// newReplicaSetName returns the name of d's ReplicaSet with image.
func newReplicaSetName(ctx context.Context, t *testing.T, d *appsv1.Deployment, image string) string {
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Name
		}
	}
	t.Fatalf("no ReplicaSet of %s runs %s", d.Name, image)
	return ""
}

// Issue 12 Done-when, EX-2: progressDeadlineSeconds 10 and the annotation
// on, set image nginx:broken → within 30 s the template is back on the
// previous image, the revision has advanced, the Warning event is there, all
// pods are available again and kubedeploy.io/failed-revision names the
// broken revision. With the annotation off: upstream behaviour, it stays
// failed.
func TestAutoRollbackOnProgressDeadline(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("annotation %v", on), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := harness.Context(t, 3*time.Minute)
			const name = "web"
			d := harness.NewDeployment(ns, name, 10, "nginx:1.9")
			d.Spec.ProgressDeadlineSeconds = new(int32(10))
			if on {
				d.Annotations = map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true"}
			}
			createDeployment(ctx, t, d)
			waitRevision(t, ns, name, "1")
			if on {
				waitDeployment(t, ns, name, "revision 1 recorded complete", func(d *appsv1.Deployment) bool {
					return d.Annotations[rolloutstate.CompleteRevisionAnnotation] == "1"
				})
			}
			setImage(ctx, t, ns, name, name, brokenImage)
			if !on {
				failed := waitDeployment(t, ns, name, "progress deadline exceeded", func(d *appsv1.Deployment) bool {
					return hasReason(d, appsv1.DeploymentProgressing, rolloutstate.ProgressDeadlineExceeded)
				})
				// The controller syncs it again and leaves it failed: nothing rolls back.
				cur := pokeAndWaitSynced(ctx, t, ns, name)
				if img := cur.Spec.Template.Spec.Containers[0].Image; img != brokenImage || cur.Annotations[revisionAnnotation] != "2" ||
					!hasReason(cur, appsv1.DeploymentProgressing, rolloutstate.ProgressDeadlineExceeded) || cur.Generation != failed.Generation+1 {
					t.Errorf("annotation off: image %s, revision %s, conditions %+v; want it left failed on %s at revision 2",
						img, cur.Annotations[revisionAnnotation], cur.Status.Conditions, brokenImage)
				}
				if msgs := eventMessages(ctx, t, ns, name, deployment.AutoRolledBack); len(msgs) != 0 {
					t.Errorf("annotation off: events %q", msgs)
				}
				return
			}
			back := waitDeploymentWithin(t, 30*time.Second, ns, name, "rolled back within 30 s of set image", func(d *appsv1.Deployment) bool {
				return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.9"
			})
			if back.Annotations[rolloutstate.FailedRevisionAnnotation] != "2" {
				t.Errorf("%s = %q, want 2", rolloutstate.FailedRevisionAnnotation, back.Annotations[rolloutstate.FailedRevisionAnnotation])
			}
			done := waitRevision(t, ns, name, "3")
			if done.Status.AvailableReplicas != 10 || done.Annotations[rolloutstate.RollbackOnProgressDeadlineAnnotation] != "true" {
				t.Errorf("after the rollback: %d available, annotations %v", done.Status.AvailableReplicas, done.Annotations)
			}
			waitEvent(t, ns, name, deployment.AutoRolledBack, fmt.Sprintf(
				`Rolled back deployment %q from revision 2, which exceeded its progress deadline, to revision 1 (ReplicaSet %q)`,
				name, newReplicaSetName(ctx, t, done, "nginx:1.9")))
			// Never loops: synced again, the broken revision is not rolled forward to, and the template stays put
			// (the generation moved by the poke alone).
			cur := pokeAndWaitSynced(ctx, t, ns, name)
			if cur.Spec.Template.Spec.Containers[0].Image != "nginx:1.9" || cur.Generation != done.Generation+1 ||
				cur.Annotations[revisionAnnotation] != "3" {
				t.Errorf("template moved after the rollback completed: %s, revision %s, generation %d → %d",
					cur.Spec.Template.Spec.Containers[0].Image, cur.Annotations[revisionAnnotation], done.Generation, cur.Generation)
			}
		})
	}
}

// Issue 44, item 1 (EX-2), as the newcomer ran it, with the real kubectl: revision 1 completes, revision 2
// (nginx:broken) is rolled back automatically to revision 3, which completes; then `kubectl rollout undo
// --to-revision=2` by hand, which replaces the Deployment's annotations with the broken ReplicaSet's. The undo's
// rollout (revision 4) is never recorded complete, and at its deadline it is rolled back again, to the ReplicaSet
// that really completed, with the Warning event naming both revisions.
func TestAutoRollbackAfterHandUndo(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	const name = "web"
	d := harness.NewDeployment(ns, name, 5, "nginx:1.9")
	d.Spec.ProgressDeadlineSeconds = new(int32(10))
	d.Annotations = map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true"}
	createDeployment(ctx, t, d)
	waitRevision(t, ns, name, "1")
	setImage(ctx, t, ns, name, name, brokenImage)
	waitDeployment(t, ns, name, "rolled back to revision 3 and recorded complete", func(d *appsv1.Deployment) bool {
		return d.Annotations[rolloutstate.FailedRevisionAnnotation] == "2" && d.Annotations[rolloutstate.CompleteRevisionAnnotation] == "3"
	})
	if _, err := env.Kubectl(ctx, "-n", ns, "rollout", "undo", "deployment/"+name, "--to-revision=2"); err != nil {
		t.Fatal(err)
	}
	undone := waitDeployment(t, ns, name, "the undo's rollout observed", func(d *appsv1.Deployment) bool {
		return observed(d) && d.Annotations[revisionAnnotation] == "4"
	})
	if img := undone.Spec.Template.Spec.Containers[0].Image; img != brokenImage {
		t.Fatalf("after the undo the template runs %s, want %s", img, brokenImage)
	}
	back := waitDeployment(t, ns, name, "rolled back again from revision 4", func(d *appsv1.Deployment) bool {
		return d.Annotations[rolloutstate.FailedRevisionAnnotation] == "4"
	})
	if img := back.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.9" {
		t.Errorf("rolled back to %s, want nginx:1.9 (revision 3, the last that completed)", img)
	}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, back) {
		if rec, ok := rs.Annotations[rolloutstate.CompletedAtRevisionAnnotation]; ok && rs.Spec.Template.Spec.Containers[0].Image == brokenImage {
			t.Errorf("the broken ReplicaSet %s is recorded complete at revision %s", rs.Name, rec)
		}
	}
	waitEvent(t, ns, name, deployment.AutoRolledBack, fmt.Sprintf(
		`Rolled back deployment %q from revision 4, which exceeded its progress deadline, to revision 3 (ReplicaSet %q)`,
		name, newReplicaSetName(ctx, t, back, "nginx:1.9")))
	waitRevision(t, ns, name, "5")
}
