package integration

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// kubedeployAnnotations returns the kubedeploy.io/ annotations among m.
func kubedeployAnnotations(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if rolloutstate.IsKubedeployAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

// waitPolicyOnReplicaSets waits until every ReplicaSet of ns/name carries exactly the kubedeploy.io/
// annotations want (EX-0: the Deployment's current policy, nothing else of kubedeploy's).
func waitPolicyOnReplicaSets(ctx context.Context, t *testing.T, ns, name string, want map[string]string) {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitReplicaSets(t, d, fmt.Sprintf("ReplicaSets carrying the Deployment's policy %v", want), func(rss []appsv1.ReplicaSet) bool {
		for _, rs := range rss {
			if !maps.Equal(kubedeployAnnotations(rs.Annotations), want) {
				return false
			}
		}
		return len(rss) > 0
	})
}

// Issue 33, point 1, as the newcomer hit it, with the real kubectl: a Deployment with a partition ("banana",
// invalid) and auto-rollback; the user removes both, rolls a broken image, and runs `kubectl rollout undo`.
// Before EX-0 the undo brought both annotations back from the ReplicaSet and the rollout stuck. Now the
// Deployment's annotations after the undo are what the user left, the rollout completes, and no ReplicaSet
// carries a kubedeploy.io/ key. Then, with a partition in place, an undo keeps it. The rollout bounds (one
// ReplicaSet per template, the surge of the max-replicas annotations) are checked at every ReplicaSet change.
func TestUndoKeepsTheDeploymentsPolicy(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	const name = "web"
	d := harness.NewDeployment(ns, name, 10, "nginx:1.9")
	d.Spec.ProgressDeadlineSeconds = new(int32(10))
	d.Annotations = map[string]string{
		rolloutstate.RolloutPartitionAnnotation:           "banana",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true",
	}
	createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout) // a first rollout has no old pods to keep
	w := harness.WatchRolloutWith(t, env.Client, ns, name, harness.WatchOptions{SurgeFromAnnotations: true, OneNewReplicaSet: true})

	setImage(ctx, t, ns, name, name, "nginx:1.9.3")
	stuck := waitDeployment(t, ns, name, "stuck on the invalid partition", func(d *appsv1.Deployment) bool {
		return observed(d) && hasReason(d, appsv1.DeploymentProgressing, rolloutstate.InvalidRolloutPartition)
	})
	if c := condition(stuck, appsv1.DeploymentProgressing); !contains(c.Message, `kubedeploy.io/rollout-partition "banana": want`) {
		t.Errorf("Progressing message %q does not name the value and what it wants", c.Message)
	}
	setAnnotation(ctx, t, ns, name, rolloutstate.RolloutPartitionAnnotation, "")
	setAnnotation(ctx, t, ns, name, rolloutstate.RollbackOnProgressDeadlineAnnotation, "")
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	waitPolicyOnReplicaSets(ctx, t, ns, name, map[string]string{})

	setImage(ctx, t, ns, name, name, brokenImage)
	waitDeployment(t, ns, name, "progress deadline exceeded", func(d *appsv1.Deployment) bool {
		return hasReason(d, appsv1.DeploymentProgressing, rolloutstate.ProgressDeadlineExceeded)
	})
	if _, err := env.Kubectl(ctx, "-n", ns, "rollout", "undo", "deployment/"+name); err != nil {
		t.Fatal(err)
	}
	after, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := kubedeployAnnotations(after.Annotations); len(got) != 0 {
		t.Errorf("after kubectl rollout undo the Deployment has %v; the user had removed every kubedeploy.io/ annotation", got)
	}
	done := harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	if img := done.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.9.3" || done.Status.AvailableReplicas != 10 {
		t.Errorf("after the undo: image %s, %d available; want nginx:1.9.3 complete", img, done.Status.AvailableReplicas)
	}
	waitPolicyOnReplicaSets(ctx, t, ns, name, map[string]string{})

	// A policy the user has is kept by an undo: every ReplicaSet carries it, so kubectl copies it back.
	checkUndoKeepsPartition(ctx, t, ns, name)
	w.Stop()
	w.Check(10)
}

// checkUndoKeepsPartition sets a 100% partition on Deployment ns/name,
// waits for every ReplicaSet to carry it, rolls a new image out, runs
// `kubectl rollout undo` and checks that the Deployment still has the
// partition, and only it, of kubedeploy's annotations.
func checkUndoKeepsPartition(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	setAnnotation(ctx, t, ns, name, rolloutstate.RolloutPartitionAnnotation, "100%")
	waitPolicyOnReplicaSets(ctx, t, ns, name, map[string]string{rolloutstate.RolloutPartitionAnnotation: "100%"})
	setImage(ctx, t, ns, name, name, "nginx:1.9.4")
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	if _, err := env.Kubectl(ctx, "-n", ns, "rollout", "undo", "deployment/"+name); err != nil {
		t.Fatal(err)
	}
	kept := harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	if got := kubedeployAnnotations(kept.Annotations); !maps.Equal(got, map[string]string{rolloutstate.RolloutPartitionAnnotation: "100%"}) {
		t.Errorf("after an undo with a partition in place the Deployment has %v, want the partition kept", got)
	}
}
