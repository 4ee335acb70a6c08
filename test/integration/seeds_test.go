package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The tests in this file replay the walkthroughs of the seed documents
// (../shared/seeds/001_*.txt and 004_*.txt) through the API, as `kubedeploy
// kubectl set image|scale|rollout undo|pause|resume` would.

// scalingSince returns the ScalingReplicaSet messages of d from the first one
// that mentions ReplicaSet rs on.
func scalingSince(ctx context.Context, t *testing.T, d *appsv1.Deployment, rs string) []string {
	t.Helper()
	msgs := eventMessages(ctx, t, d.Namespace, d.Name, deployment.ScalingReplicaSet)
	for i, m := range msgs {
		if strings.Contains(m, " "+rs+" ") {
			return msgs[i:]
		}
	}
	return nil
}

// rsNames returns the names of d's ReplicaSets at revisions 1 and 2.
func rsNames(ctx context.Context, t *testing.T, d *appsv1.Deployment) (string, string) {
	t.Helper()
	byRev := replicaSetsByRevision(ctx, t, d)
	return byRev["1"].Name, byRev["2"].Name
}

// TestSeedRollingUpdateTrace is seed 001's `kubectl get rs -w` trace and spec
// RU-16: 10 replicas with 25%/25% (maxSurge 3, maxUnavailable 2). After `set
// image` the new ReplicaSet is created at 3 while the old one goes 10→8 in the
// same sync, then the new one goes 3→5; the rollout ends at old 0, new 10,
// never above 13 replicas or below 8 available.
func TestSeedRollingUpdateTrace(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx-deployment", 10, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	w := harness.WatchRollout(t, env.Client, ns, d.Name, harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	d = waitRevision(t, ns, d.Name, "2")
	w.Stop()
	w.Check(6)
	oldRS, newRS := rsNames(ctx, t, d)
	var msgs []string
	harness.Eventually(t, time.Minute, "the first scaling events", func(ctx context.Context) (bool, error) {
		msgs = scalingSince(ctx, t, d, newRS)
		return len(msgs) >= 3, nil
	})
	want := []string{
		"Scaled up replica set " + newRS + " from 0 to 3",
		"Scaled down replica set " + oldRS + " from 10 to 8",
		"Scaled up replica set " + newRS + " from 3 to 5",
	}
	if !slices.Equal(msgs[:3], want) {
		t.Errorf("first scaling events\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	// The end state comes from the ReplicaSets: after ten similar events the
	// event recorder combines further ones into one aggregate event.
	byRev := replicaSetsByRevision(ctx, t, d)
	if o, n := byRev["1"], byRev["2"]; specOf(&o) != 0 || specOf(&n) != 10 {
		t.Errorf("final ReplicaSets old %d new %d, want 0 and 10", specOf(&o), specOf(&n))
	}
}

// TestSeedOneByOne is seed 004's sequence (RU-9..RU-11 with 3 replicas:
// maxSurge 1, maxUnavailable 0): new 0→1, old 3→2, new 1→2, old 2→1,
// new 2→3, old 1→0, exactly in that order.
func TestSeedOneByOne(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx-deployment", 3, "nginx:1.14.2"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.16.1")
	d = waitRevision(t, ns, d.Name, "2")
	oldRS, newRS := rsNames(ctx, t, d)
	want := []string{
		fmt.Sprintf("Scaled up replica set %s from 0 to 1", newRS),
		fmt.Sprintf("Scaled down replica set %s from 3 to 2", oldRS),
		fmt.Sprintf("Scaled up replica set %s from 1 to 2", newRS),
		fmt.Sprintf("Scaled down replica set %s from 2 to 1", oldRS),
		fmt.Sprintf("Scaled up replica set %s from 2 to 3", newRS),
		fmt.Sprintf("Scaled down replica set %s from 1 to 0", oldRS),
	}
	var got []string
	harness.Eventually(t, time.Minute, "six scaling events", func(ctx context.Context) (bool, error) {
		got = scalingSince(ctx, t, d, newRS)
		return len(got) >= len(want), nil
	})
	if !slices.Equal(got, want) {
		t.Errorf("scaling events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSeedRollbackWithChangeCause is seed 004's history walkthrough (OM-6,
// RV-4, RV-2, RV-6, RB-3..RB-7, RB-9): change-cause annotations follow the
// ReplicaSets; `rollout undo` after a broken update brings revision 2's
// template back as revision 4 with its change-cause and revision-history 2;
// the deprecated rollback annotation then rolls back to revision 1 (event
// DeploymentRollback, change-cause copied back), and to a missing revision
// emits DeploymentRollbackRevisionNotFound and is cleared.
func TestSeedRollbackWithChangeCause(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	d := harness.NewDeployment(ns, "nginx-deployment", 3, "nginx:1.14.2")
	d.Annotations = map[string]string{changeCauseAnnotation: "nginx deployment created"}
	d = createDeployment(ctx, t, d)
	waitRevision(t, ns, d.Name, "1")
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.16.1"
		d.Annotations[changeCauseAnnotation] = "image updated to 1.16.1"
	})
	waitRevision(t, ns, d.Name, "2")
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "nginx:broken-1611"
		d.Annotations[changeCauseAnnotation] = "image updated to 1.1611"
	})
	waitDeployment(t, ns, d.Name, "revision 3", func(d *appsv1.Deployment) bool { return d.Annotations[revisionAnnotation] == "3" })
	checkChangeCauses(ctx, t, d, map[string]string{"1": "nginx deployment created", "2": "image updated to 1.16.1", "3": "image updated to 1.1611"})

	kubectlUndo(ctx, t, d, "")
	d = waitRevision(t, ns, d.Name, "4")
	if d.Annotations[changeCauseAnnotation] != "image updated to 1.16.1" || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.16.1" {
		t.Errorf("after undo: change-cause %q image %q", d.Annotations[changeCauseAnnotation], d.Spec.Template.Spec.Containers[0].Image)
	}
	if rs := replicaSetsByRevision(ctx, t, d)["4"]; rs.Annotations[historyAnnotation] != "2" {
		t.Errorf("revision 4 revision-history = %q, want 2", rs.Annotations[historyAnnotation])
	}

	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Annotations[appsv1.DeprecatedRollbackTo] = "1" })
	waitEvent(t, ns, d.Name, deployment.RollbackDone, fmt.Sprintf("Rolled back deployment %q to revision 1", d.Name))
	d = waitRevision(t, ns, d.Name, "5")
	if _, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; ok || d.Annotations[changeCauseAnnotation] != "nginx deployment created" {
		t.Errorf("after rollback to 1: annotations %v", d.Annotations)
	}
	checkChangeCauses(ctx, t, d, map[string]string{"5": "nginx deployment created", "4": "image updated to 1.16.1", "3": "image updated to 1.1611"})

	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Annotations[appsv1.DeprecatedRollbackTo] = "99" })
	waitEvent(t, ns, d.Name, deployment.RollbackRevisionNotFound, "Unable to find the revision to rollback to.")
	waitDeployment(t, ns, d.Name, "the rollback annotation cleared", func(d *appsv1.Deployment) bool {
		_, ok := d.Annotations[appsv1.DeprecatedRollbackTo]
		return !ok && d.Annotations[revisionAnnotation] == "5"
	})
}

// checkChangeCauses compares the change-cause of d's ReplicaSets by revision
// with want (what `kubectl rollout history` prints).
func checkChangeCauses(ctx context.Context, t *testing.T, d *appsv1.Deployment, want map[string]string) {
	t.Helper()
	byRev := replicaSetsByRevision(ctx, t, d)
	for rev, cause := range want {
		if got := byRev[rev].Annotations[changeCauseAnnotation]; got != cause {
			t.Errorf("revision %s change-cause %q, want %q", rev, got, cause)
		}
	}
}

// TestSeedPauseResumeScale is seed 001's pause/resume and scale (SD-6, SD-7,
// SD-11, ST-18): while paused, several template changes and a scale to 5
// create no ReplicaSet (the existing one is scaled); resume rolls all the
// changes out as a single revision 2.
func TestSeedPauseResumeScale(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx-deployment", 3, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = true })
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
	})
	scaleDeployment(ctx, t, ns, d.Name, 5)
	d = waitDeployment(t, ns, d.Name, "paused at 5", func(d *appsv1.Deployment) bool {
		// No ReplicaSet has the paused template, so none counts as updated (ST-2).
		return observed(d) && d.Status.Replicas == 5 && d.Status.AvailableReplicas == 5 && d.Status.UpdatedReplicas == 0 &&
			hasReason(d, appsv1.DeploymentProgressing, deployment.DeploymentPaused)
	})
	if rss := harness.OwnedReplicaSets(ctx, t, env.Client, d); len(rss) != 1 || specOf(&rss[0]) != 5 {
		t.Fatalf("while paused: ReplicaSets %s, want one of 5", sizes(rss))
	}
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	d = waitRevision(t, ns, d.Name, "2")
	if rss := harness.OwnedReplicaSets(ctx, t, env.Client, d); sizes(rss) != "[0 5]" {
		t.Errorf("after resume: ReplicaSets %s, want [0 5]", sizes(rss))
	}
}
