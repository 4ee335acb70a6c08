package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

const (
	desiredAnnotation     = "deployment.kubernetes.io/desired-replicas"
	maxAnnotation         = "deployment.kubernetes.io/max-replicas"
	historyAnnotation     = "deployment.kubernetes.io/revision-history"
	changeCauseAnnotation = "kubernetes.io/change-cause"
	brokenImage           = "nginx:broken"
)

// createDeployment creates d and returns the stored object.
func createDeployment(ctx context.Context, t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	got, err := env.Client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating deployment %s: %v", d.Name, err)
	}
	return got
}

// withStrategy sets a RollingUpdate strategy with int maxSurge/maxUnavailable.
func withStrategy(d *appsv1.Deployment, surge, unavailable int) *appsv1.Deployment {
	s, u := intstr.FromInt32(int32(surge)), intstr.FromInt32(int32(unavailable))
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
	return d
}

// recreate switches d to the Recreate strategy.
func recreate(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// updateDeployment applies mutate to the latest ns/name and writes it,
// retrying on conflicts (a user racing the controller's status writes).
func updateDeployment(ctx context.Context, t *testing.T, ns, name string, mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	var out *appsv1.Deployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(d)
		out, err = env.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating deployment %s: %v", name, err)
	}
	return out
}

// scaleDeployment sets spec.replicas through a merge patch (kubectl scale).
func scaleDeployment(ctx context.Context, t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	harness.ScaleDeployment(ctx, t, env.Client, ns, name, replicas)
}

// waitDeployment polls ns/name until cond holds and returns it.
func waitDeployment(t *testing.T, ns, name, what string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	return waitDeploymentWithin(t, rolloutTimeout, ns, name, what, cond)
}

// waitDeploymentWithin is waitDeployment with its own timeout, for a requirement that says "within".
func waitDeploymentWithin(t *testing.T, timeout time.Duration, ns, name, what string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var last *appsv1.Deployment
	harness.Eventually(t, timeout, fmt.Sprintf("deployment %s: %s", name, what), func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		return cond(d), nil
	})
	return last
}

// observed reports whether the controller has seen d's current generation.
func observed(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration >= d.Generation }

// condition returns the condition of d of type t, or nil.
func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// hasReason reports whether d's condition of type ct has reason.
func hasReason(d *appsv1.Deployment, ct appsv1.DeploymentConditionType, reason string) bool {
	c := condition(d, ct)
	return c != nil && c.Reason == reason
}

// waitRevision waits for ns/name to be complete at revision rev.
func waitRevision(t *testing.T, ns, name, rev string) *appsv1.Deployment {
	t.Helper()
	return waitDeployment(t, ns, name, "complete at revision "+rev, func(d *appsv1.Deployment) bool {
		return harness.DeploymentComplete(d) && d.Annotations[revisionAnnotation] == rev &&
			hasReason(d, appsv1.DeploymentProgressing, rolloutstate.NewReplicaSetAvailable)
	})
}

// replicaSetsByRevision returns d's ReplicaSets keyed by revision annotation.
func replicaSetsByRevision(ctx context.Context, t *testing.T, d *appsv1.Deployment) map[string]appsv1.ReplicaSet {
	t.Helper()
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, env.Client, d) {
		out[rs.Annotations[revisionAnnotation]] = rs
	}
	return out
}

// waitReplicaSets polls d's ReplicaSets until cond holds and returns them.
func waitReplicaSets(t *testing.T, d *appsv1.Deployment, what string, cond func([]appsv1.ReplicaSet) bool) []appsv1.ReplicaSet {
	t.Helper()
	var last []appsv1.ReplicaSet
	harness.Eventually(t, rolloutTimeout, what, func(ctx context.Context) (bool, error) {
		last = harness.OwnedReplicaSets(ctx, t, env.Client, d)
		return cond(last), nil
	})
	return last
}

// contains is strings.Contains.
func contains(s, sub string) bool { return strings.Contains(s, sub) }

// sizes returns the spec.replicas of rss sorted ascending, formatted "[a b]".
func sizes(rss []appsv1.ReplicaSet) string {
	out := make([]int, len(rss))
	for i := range rss {
		out[i] = int(specOf(&rss[i]))
	}
	sort.Ints(out)
	return fmt.Sprint(out)
}

// specOf returns spec.replicas of rs.
func specOf(rs *appsv1.ReplicaSet) int32 { return *rs.Spec.Replicas }

// eventMessages returns the messages of events with reason on object name in
// ns, in the order the API server stored them (resourceVersion order: one
// etcd, so revisions are comparable here).
func eventMessages(ctx context.Context, t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var evs []v1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			evs = append(evs, e)
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		a, _ := strconv.ParseInt(evs[i].ResourceVersion, 10, 64)
		b, _ := strconv.ParseInt(evs[j].ResourceVersion, 10, 64)
		return a < b
	})
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Message
	}
	return out
}

// waitEvent waits for an event with reason and message on object name.
func waitEvent(t *testing.T, ns, name, reason, message string) {
	t.Helper()
	harness.Eventually(t, rolloutTimeout, fmt.Sprintf("event %s %q", reason, message), func(ctx context.Context) (bool, error) {
		for _, m := range eventMessages(ctx, t, ns, name, reason) {
			if m == message {
				return true, nil
			}
		}
		return false, nil
	})
}

// kubectlUndo runs `kubectl rollout undo [--to-revision=rev]` on d through
// harness.RolloutUndo (RB-9) and fails t on any error, including a skipped
// undo; rev "" means the previous revision.
func kubectlUndo(ctx context.Context, t *testing.T, d *appsv1.Deployment, rev string) {
	t.Helper()
	var toRevision int64
	if rev != "" {
		var err error
		if toRevision, err = strconv.ParseInt(rev, 10, 64); err != nil {
			t.Fatalf("revision %q: %v", rev, err)
		}
	}
	if _, err := harness.RolloutUndo(ctx, env.Client, d.Namespace, d.Name, toRevision); err != nil {
		t.Fatal(err)
	}
}

// barrier creates a one-replica Deployment barrier-<n> in ns (selecting
// app=barrier-<n>) and waits for it to complete. That takes several syncs of
// both controllers, whose queues hand out keys in the order they were added,
// so by then every event queued before the barrier has been handled: what
// has not happened yet is not merely late. The barrier stays until ns goes.
func barrier(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	name := "barrier-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createDeployment(ctx, t, harness.NewDeployment(ns, name, 1, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
}

// unmanagedNode creates a Node that no KWOK fake kubelet manages and deletes
// it when t ends: pods bound to it (spec.nodeName) never become Ready and, once
// deleted with a grace period, stay terminating until force-deleted. That
// gives tests terminating pods for as long as they need (the shared KWOK
// removes pods 200ms after deletion).
func unmanagedNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	name := "unmanaged-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// forceDeletePods removes every pod in ns that is bound to node at once
// (grace period 0), as a kubelet would after termination.
func forceDeletePods(ctx context.Context, t *testing.T, ns, node string) {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			continue
		}
		err := env.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("force-deleting %s: %v", p.Name, err)
		}
	}
}

// getenv is os.Getenv.
func getenv(key string) string { return os.Getenv(key) }

// pokeAndWaitSynced raises Deployment ns/name's spec.revisionHistoryLimit by one (a spec change that moves no pod
// and deletes no ReplicaSet) and waits until its status observes that generation: proof that the controller has
// synced it since, so what the test then reads is what a sync decided, without sleeping to see nothing happen.
func pokeAndWaitSynced(ctx context.Context, t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limit := int32(10) // the API default
	if d.Spec.RevisionHistoryLimit != nil {
		limit = *d.Spec.RevisionHistoryLimit
	}
	patch := fmt.Sprintf(`{"spec":{"revisionHistoryLimit":%d}}`, limit+1)
	poked, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return waitDeployment(t, ns, name, "synced after the poke", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration >= poked.Generation
	})
}
