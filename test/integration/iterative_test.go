package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// iterativeSteps is how many random steps TestIterativeRollouts takes
// (upstream takes 20; fewer keep the package fast).
const iterativeSteps = 14

// TestIterativeRollouts is the e2e "iterative rollouts should eventually
// progress" (15.2): random template changes, rollbacks through the
// deprecated annotation (revision 0, RB-3), scales, pause/resume and pod
// deletions, with the surge bound (OM-4 max-replicas annotations) and "one
// ReplicaSet per template and revision" (RV-1, RU-13) checked at every
// ReplicaSet change; the Deployment always ends complete with
// NewReplicaSetAvailable. The seed is logged; rerun a failure with
// KUBEDEPLOY_ITERATIVE_SEED.
func TestIterativeRollouts(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	seed := uint64(time.Now().UnixNano())
	if s, err := fmt.Sscan(getenv("KUBEDEPLOY_ITERATIVE_SEED"), &seed); s == 1 && err == nil {
		t.Logf("seed from KUBEDEPLOY_ITERATIVE_SEED")
	}
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "iterative", 4, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	w := harness.WatchRolloutWith(t, env.Client, ns, d.Name, harness.WatchOptions{SurgeFromAnnotations: true, OneNewReplicaSet: true})
	for i := range iterativeSteps {
		step := rng.IntN(6)
		desc := iterativeStep(ctx, t, rng, ns, d.Name, step)
		t.Logf("step %d: %s", i, desc)
		time.Sleep(time.Duration(rng.IntN(800)) * time.Millisecond) // pacing only, never a pass/fail criterion
	}
	updateDeployment(ctx, t, ns, d.Name, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	d = waitDeployment(t, ns, d.Name, "complete with NewReplicaSetAvailable", func(d *appsv1.Deployment) bool {
		return harness.DeploymentComplete(d) && hasReason(d, appsv1.DeploymentProgressing, "NewReplicaSetAvailable")
	})
	w.Stop()
	w.Check(iterativeSteps / 2)
	var total int32
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		total += specOf(&rs)
	}
	if total != *d.Spec.Replicas {
		t.Errorf("ReplicaSets total %d, want %d", total, *d.Spec.Replicas)
	}
}

// iterativeStep performs random step kind on ns/name and describes it.
func iterativeStep(ctx context.Context, t *testing.T, rng *rand.Rand, ns, name string, kind int) string {
	t.Helper()
	switch kind {
	case 0, 1: // template change (twice as likely, as upstream)
		v := fmt.Sprintf("v%d", rng.IntN(4))
		updateDeployment(ctx, t, ns, name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: v}}
		})
		return "template change to VERSION=" + v
	case 2:
		updateDeployment(ctx, t, ns, name, func(d *appsv1.Deployment) {
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations[appsv1.DeprecatedRollbackTo] = "0"
		})
		return "rollback to the previous revision"
	case 3:
		n := int32(rng.IntN(7))
		scaleDeployment(ctx, t, ns, name, n)
		return fmt.Sprintf("scale to %d", n)
	case 4:
		var paused bool
		updateDeployment(ctx, t, ns, name, func(d *appsv1.Deployment) { d.Spec.Paused = !d.Spec.Paused; paused = d.Spec.Paused })
		return fmt.Sprintf("paused=%v", paused)
	default:
		return deleteRandomPods(ctx, t, rng, ns, name)
	}
}

// deleteRandomPods deletes a random subset of the Deployment's pods.
func deleteRandomPods(ctx context.Context, t *testing.T, rng *rand.Rand, ns, name string) string {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": name}.String()})
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, p := range pods.Items {
		if rng.IntN(2) == 0 {
			continue
		}
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting pod %s: %v", p.Name, err)
		}
		deleted++
	}
	return fmt.Sprintf("deleted %d of %d pods", deleted, len(pods.Items))
}
