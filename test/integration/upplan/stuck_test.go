package upplan

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestPlanOfAStuckRollout (issue 44, item 3): the seed Deployment set to nginx:broken (KWOK never pulls it)
// stops with 10 new pods in ImagePullBackOff and 15 old ones available. Planned as it is, it promises
// nothing: no step, not complete, Stuck names exactly those 10 pods with their reason and puts the progress
// deadline 600 s after the Progressing condition's lastUpdateTime. Planned back to nginx:1.9 it completes,
// and the controllers then write exactly the plan's sizes: revision 1's ReplicaSet 15 → 20, the broken one
// 10 → 0.
func TestPlanOfAStuckRollout(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := seed(t, ns)
	name := d.Name
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	oldRS := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0].Name
	harness.SetImage(ctx, t, env.Client, ns, name, name, "nginx:broken")
	cur, broken := waitStuck(t, ns, name)

	p := harness.RolloutPlan(ctx, t, env.ControlPlane.KubeconfigPath(), ns, name)
	if p.Complete || len(p.Steps) != 0 || p.Stuck == nil || len(p.Stuck.ReplicaSets) != 1 {
		t.Fatalf("plan of the stuck Deployment: complete %v, steps %+v, stuck %+v, stopped %q", p.Complete, p.Steps, p.Stuck, p.Stopped)
	}
	rs := p.Stuck.ReplicaSets[0]
	if !rs.New || rs.Name == oldRS || len(rs.Groups) != 1 || rs.Groups[0].Reason != "ImagePullBackOff" || !slices.Equal(rs.Groups[0].Pods, broken) {
		t.Errorf("failing ReplicaSet %+v; want the new one with %v in ImagePullBackOff", rs, broken)
	}
	cond := rolloutstate.Condition(&cur.Status, appsv1.DeploymentProgressing)
	if want := cond.LastUpdateTime.Add(600 * time.Second); p.Stuck.Deadline == nil || !p.Stuck.Deadline.Time.Equal(want) || p.Stuck.DeadlineExceeded {
		t.Errorf("deadline %v, want %v (Progressing %s, updated %v)", p.Stuck.Deadline, want, cond.Reason, cond.LastUpdateTime)
	}

	back := harness.RolloutPlan(ctx, t, env.ControlPlane.KubeconfigPath(), ns, name, "--image", name+"=nginx:1.9")
	i := slices.Index(back.OldReplicaSets, rs.Name)
	if !back.Complete || back.Stuck != nil || back.NewReplicaSet != oldRS || i < 0 {
		t.Fatalf("plan back to nginx:1.9: %+v", back)
	}
	sizes := harness.WatchReplicaSetSizes(ctx, t, env.Client, ns)
	defer sizes.Stop()
	harness.SetImage(ctx, t, env.Client, ns, name, name, "nginx:1.9")
	harness.Eventually(t, rolloutTimeout, "the rollout back to nginx:1.9 complete", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := sizes.Of(rs.Name)
		return d.Status.ObservedGeneration == d.Generation && harness.DeploymentComplete(d) && len(s) > 0 && s[len(s)-1] == 0, nil
	})
	// The watch starts at each ReplicaSet's size before the change.
	gotNew, wantNew := sizes.Of(oldRS), back.NewReplicaSetSizes()
	gotBroken, wantBroken := sizes.Of(rs.Name), append([]int32{10}, back.OldReplicaSetSizes(i)...)
	if !slices.Equal(gotNew, wantNew) || !slices.Equal(gotBroken, wantBroken) {
		t.Errorf("revision 1's ReplicaSet: controllers %v, plan %v; the broken one: controllers %v, plan %v", gotNew, wantNew, gotBroken, wantBroken)
	}
}

// waitStuck waits until Deployment ns/name reports 10 of 20 pods updated and 15 available, its new
// ReplicaSet's 10 pods waiting in ImagePullBackOff, and returns the Deployment and those pods' names, sorted.
func waitStuck(t *testing.T, ns, name string) (*appsv1.Deployment, []string) {
	t.Helper()
	var cur *appsv1.Deployment
	var broken []string
	harness.Eventually(t, time.Minute, "10 new pods in ImagePullBackOff, 15 old ones available", func(ctx context.Context) (bool, error) {
		var err error
		if cur, err = env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		broken = broken[:0]
		for _, p := range pods.Items {
			if s := p.Status.ContainerStatuses; len(s) > 0 && s[0].State.Waiting != nil && s[0].State.Waiting.Reason == "ImagePullBackOff" {
				broken = append(broken, p.Name)
			}
		}
		st := cur.Status
		return st.ObservedGeneration == cur.Generation && st.UpdatedReplicas == 10 && st.AvailableReplicas == 15 && len(broken) == 10, nil
	})
	slices.Sort(broken)
	return cur, broken
}
