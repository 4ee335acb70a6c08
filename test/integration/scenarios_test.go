package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The tests in this file are upstream's test/integration/deployment
// scenarios (spec 15.1) run on the embedded control plane.

// TestPausedDeployment (15.1 TestPausedDeployment): a Deployment paused at
// creation gets no ReplicaSet but the DeploymentPaused condition (SD-6, SD-7,
// SD-11); resuming rolls out revision 1 (DeploymentResumed, then complete);
// pausing again and changing the template creates no ReplicaSet and leaves the
// existing one's template alone (SD-7: paused syncs never create).
func TestPausedDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "paused", 2, "nginx:1.9")
	d.Spec.Paused = true
	d = createDeployment(ctx, t, d)
	d = waitDeployment(t, ns, d.Name, "DeploymentPaused", func(d *appsv1.Deployment) bool {
		return observed(d) && hasReason(d, appsv1.DeploymentProgressing, deployment.DeploymentPaused)
	})
	if rss := harness.OwnedReplicaSets(ctx, t, env.Client, d); len(rss) != 0 {
		t.Fatalf("paused deployment has %d ReplicaSets, want 0", len(rss))
	}
	if c := condition(d, appsv1.DeploymentProgressing); c.Status != v1.ConditionUnknown || c.Message != "Deployment is paused" {
		t.Errorf("Progressing = %+v", c)
	}

	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	d = waitRevision(t, ns, d.Name, "1")
	rss := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	if len(rss) != 1 {
		t.Fatalf("got %d ReplicaSets after resume, want 1", len(rss))
	}

	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	})
	d = waitDeployment(t, ns, d.Name, "paused change observed", func(d *appsv1.Deployment) bool {
		return observed(d) && hasReason(d, appsv1.DeploymentProgressing, deployment.DeploymentPaused)
	})
	after := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	if len(after) != 1 || after[0].UID != rss[0].UID {
		t.Fatalf("paused template change: ReplicaSets %d, want the original one only", len(after))
	}
	if img := after[0].Spec.Template.Spec.Containers[0].Image; img != "nginx:1.9" {
		t.Errorf("paused template change reached the old ReplicaSet: image %s", img)
	}

	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	waitRevision(t, ns, d.Name, "2")
}

// TestScalePausedDeployment (15.1): scaling a paused Deployment scales its one
// ReplicaSet (SD-7, SD-11, PS-1) and completes without a new ReplicaSet.
func TestScalePausedDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "scale-paused", 1, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = true })
	scaleDeployment(ctx, t, ns, d.Name, 6)
	d = waitDeployment(t, ns, d.Name, "complete at 6 while paused", func(d *appsv1.Deployment) bool {
		return d.Spec.Paused && harness.DeploymentComplete(d) && *d.Spec.Replicas == 6
	})
	rss := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	if len(rss) != 1 || specOf(&rss[0]) != 6 || rss[0].Annotations[desiredAnnotation] != "6" {
		t.Fatalf("ReplicaSets after paused scale: %d, want one of size 6 annotated desired 6", len(rss))
	}
}

// TestDeploymentHashCollision (15.1, RV-10, OM-17): when the new ReplicaSet's
// template is changed behind the controller's back, the deterministic name of
// the next ReplicaSet is taken by a different template; the controller bumps
// status.collisionCount to 1 and creates revision 2 under another hash.
func TestDeploymentHashCollision(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "collide", 2, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	first := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0]
	patch := `{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":7}}}}`
	if _, err := env.Client.AppsV1().ReplicaSets(ns).Patch(ctx, first.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("mutating the ReplicaSet template: %v", err)
	}
	d = waitRevision(t, ns, d.Name, "2")
	if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount = %v, want 1", d.Status.CollisionCount)
	}
	byRev := replicaSetsByRevision(ctx, t, d)
	second, ok := byRev["2"]
	if !ok || second.Name == first.Name || second.Labels[hashLabel] == first.Labels[hashLabel] {
		t.Fatalf("revision 2 ReplicaSet %q (first %q): want a new name and hash", second.Name, first.Name)
	}
}

// TestFailedDeployment (15.1): with progressDeadlineSeconds 3 and pods that
// never become ready, Progressing turns False ProgressDeadlineExceeded with
// the ST-13 message; once the rollout can progress again (a working image) it
// returns to NewReplicaSetAvailable.
func TestFailedDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "failed", 2, brokenImage)
	d.Spec.ProgressDeadlineSeconds = new(int32(3))
	d = createDeployment(ctx, t, d)
	d = waitDeployment(t, ns, d.Name, "ProgressDeadlineExceeded", func(d *appsv1.Deployment) bool {
		return hasReason(d, appsv1.DeploymentProgressing, rolloutstate.ProgressDeadlineExceeded)
	})
	rs := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0]
	c := condition(d, appsv1.DeploymentProgressing)
	if c.Status != v1.ConditionFalse || c.Message != `ReplicaSet "`+rs.Name+`" has timed out progressing.` {
		t.Errorf("Progressing = %+v", c)
	}
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9")
	waitRevision(t, ns, d.Name, "2")
}

// TestOverlappingDeployments (15.1, AD-1, OM-21): two Deployments with the
// same selector and template each get and keep their own ReplicaSet; scaling
// one scales only its ReplicaSet.
func TestOverlappingDeployments(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	a := harness.NewDeployment(ns, "first", 2, "nginx:1.9")
	b := harness.NewDeployment(ns, "second", 3, "nginx:1.9")
	b.Spec.Selector, b.Spec.Template = a.Spec.Selector.DeepCopy(), *a.Spec.Template.DeepCopy()
	a, b = createDeployment(ctx, t, a), createDeployment(ctx, t, b)
	harness.WaitComplete(t, env.Client, ns, a.Name, rolloutTimeout)
	harness.WaitComplete(t, env.Client, ns, b.Name, rolloutTimeout)
	scaleDeployment(ctx, t, ns, a.Name, 4)
	harness.WaitComplete(t, env.Client, ns, a.Name, rolloutTimeout)
	for _, tc := range []struct {
		d    *appsv1.Deployment
		size int32
	}{{a, 4}, {b, 3}} {
		rss := harness.OwnedReplicaSets(ctx, t, env.Client, tc.d)
		if len(rss) != 1 || specOf(&rss[0]) != tc.size {
			t.Errorf("%s: %d ReplicaSets, want one of size %d", tc.d.Name, len(rss), tc.size)
		}
	}
	d := waitDeployment(t, ns, b.Name, "still complete", harness.DeploymentComplete)
	if d.Status.Replicas != 3 {
		t.Errorf("%s status.replicas = %d, want 3", b.Name, d.Status.Replicas)
	}
}

// TestScaledRolloutDeployment (15.1, RU-10, RU-11, PS-3): mid-rollout (stuck
// on a broken image) availability stays at least minAvailable; a template
// change together with a scale-up to 20 completes with every ReplicaSet
// annotated desired-replicas 20, then another with a scale-down to 5
// completes with the ReplicaSets it touched annotated 5 (OM-3).
func TestScaledRolloutDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	d := createDeployment(ctx, t, withStrategy(harness.NewDeployment(ns, "scaled", 10, "nginx:1.9"), 3, 2))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	w := harness.WatchRollout(t, env.Client, ns, d.Name, harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	setImage(ctx, t, ns, d.Name, d.Name, brokenImage)
	waitReplicaSets(t, d, "the rollout to be stuck at 8 old and 5 new", func(rss []appsv1.ReplicaSet) bool {
		return len(rss) == 2 && sizes(rss) == "[5 8]"
	})
	w.Stop()
	w.Check(3)

	// As upstream: scale up to 20 with a working image and wait for the
	// rollout to complete; every ReplicaSet was scaled (PS-3, force) or
	// created while spec.replicas was 20, so all say desired-replicas 20.
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Replicas = new(int32(20))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.2"
	})
	d = waitRevision(t, ns, d.Name, "3")
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	checkDesired(ctx, t, d, "20", nil)

	// Scale down to 5 with another image: the ReplicaSet active at that
	// moment (revision 3) and the new one (revision 4) say 5; ReplicaSets
	// already at 0 keep the value of their last resize (OM-3).
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) {
		d.Spec.Replicas = new(int32(5))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.9.3"
	})
	d = waitRevision(t, ns, d.Name, "4")
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	checkDesired(ctx, t, d, "5", map[string]bool{"3": true, "4": true})
}

// checkDesired fails t unless every ReplicaSet of d whose revision is in
// revisions (all when nil) has the desired-replicas annotation want.
func checkDesired(ctx context.Context, t *testing.T, d *appsv1.Deployment, want string, revisions map[string]bool) {
	t.Helper()
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		if revisions != nil && !revisions[rs.Annotations[revisionAnnotation]] {
			continue
		}
		if rs.Annotations[desiredAnnotation] != want {
			t.Errorf("ReplicaSet %s (revision %s) desired-replicas = %q, want %s", rs.Name, rs.Annotations[revisionAnnotation], rs.Annotations[desiredAnnotation], want)
		}
	}
}

// TestSpecReplicasChange (15.1): a Recreate Deployment scaled 2→0→1 keeps its
// ReplicaSet sized to match (PS-1, RC-5); changing revisionHistoryLimit bumps
// generation and observedGeneration catches up (ST-1, ST-19).
func TestSpecReplicasChange(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := createDeployment(ctx, t, recreate(harness.NewDeployment(ns, "replicas", 2, "nginx:1.9")))
	for _, n := range []int32{2, 0, 1} {
		if n != 2 {
			scaleDeployment(ctx, t, ns, d.Name, n)
		}
		d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
		rss := harness.OwnedReplicaSets(ctx, t, env.Client, d)
		if len(rss) != 1 || specOf(&rss[0]) != n {
			t.Fatalf("at %d replicas: %d ReplicaSets %v", n, len(rss), rss)
		}
	}
	gen := d.Generation
	d = updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = new(int32(4)) })
	if d.Generation <= gen {
		t.Fatalf("generation %d not bumped from %d", d.Generation, gen)
	}
	waitDeployment(t, ns, d.Name, "observedGeneration to catch up", func(got *appsv1.Deployment) bool {
		return got.Status.ObservedGeneration == d.Generation
	})
}

// TestDeploymentAvailableCondition (15.1, ST-2..ST-4, RS-15): with
// minReadySeconds 3600 ready pods are not available, so Available is False
// MinimumReplicasUnavailable with exact counts; lowering minReadySeconds to 1
// (RV-2e copies it to the ReplicaSet) makes them available.
func TestDeploymentAvailableCondition(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "available", 4, "nginx:1.9")
	d.Spec.MinReadySeconds = 3600
	d.Spec.ProgressDeadlineSeconds = new(int32(7200))
	d = createDeployment(ctx, t, d)
	d = waitDeployment(t, ns, d.Name, "4 ready, 0 available", func(d *appsv1.Deployment) bool {
		return d.Status.ReadyReplicas == 4 && hasReason(d, appsv1.DeploymentAvailable, deployment.MinimumReplicasUnavailable)
	})
	want := appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 0, UnavailableReplicas: 4}
	checkCounts(t, d, want)
	if c := condition(d, appsv1.DeploymentAvailable); c.Status != v1.ConditionFalse || c.Message != "Deployment does not have minimum availability." {
		t.Errorf("Available = %+v", c)
	}
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 1 })
	d = waitDeployment(t, ns, d.Name, "MinimumReplicasAvailable", func(d *appsv1.Deployment) bool {
		return harness.DeploymentComplete(d) && hasReason(d, appsv1.DeploymentAvailable, deployment.MinimumReplicasAvailable)
	})
	checkCounts(t, d, appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4})
}

// checkCounts compares the replica counts of d's status with want's and
// requires terminatingReplicas to be reported as 0 (ST-3, gate on).
func checkCounts(t *testing.T, d *appsv1.Deployment, want appsv1.DeploymentStatus) {
	t.Helper()
	s := d.Status
	if s.Replicas != want.Replicas || s.UpdatedReplicas != want.UpdatedReplicas || s.ReadyReplicas != want.ReadyReplicas ||
		s.AvailableReplicas != want.AvailableReplicas || s.UnavailableReplicas != want.UnavailableReplicas {
		t.Errorf("status counts %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d (replicas/updated/ready/available/unavailable)",
			s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas,
			want.Replicas, want.UpdatedReplicas, want.ReadyReplicas, want.AvailableReplicas, want.UnavailableReplicas)
	}
	if s.TerminatingReplicas == nil || *s.TerminatingReplicas != 0 {
		t.Errorf("terminatingReplicas = %v, want 0", s.TerminatingReplicas)
	}
}

// TestDeploymentSelectorImmutability (15.1, VA-11): the apps/v1 selector
// cannot be changed.
func TestDeploymentSelectorImmutability(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "immutable", 1, "nginx:1.9"))
	d.Spec.Selector.MatchLabels["extra"] = "x"
	d.Spec.Template.Labels["extra"] = "x"
	_, err := env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	if err == nil || !contains(err.Error(), "field is immutable") {
		t.Fatalf("selector update error = %v, want field is immutable", err)
	}
}
