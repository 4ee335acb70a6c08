package faults

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/faultproxy"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The shortened clocks of the lagging-watch tests: the watch lags for far
// longer than the expectations TTL and the read-your-writes wait cap, which is
// when issue 7 saw upstream-style controllers act on the stale cache.
const (
	shortTTL     = 4 * time.Second
	shortMaxWait = 2 * time.Second
	watchLag     = 15 * time.Second
)

// startControllers starts a fault proxy in front of the API server and both
// controllers behind it, with the shortened clocks; both stop when t ends.
func startControllers(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	ctx := harness.Context(t, 10*time.Minute)
	proxy, err := faultproxy.Start(ctx, env.Config, faultproxy.Options{})
	if err != nil {
		t.Fatalf("starting the fault proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	stop := env.RunControllers(manager.Config{
		RESTConfig: proxy.Config(), ExpectationsTimeout: shortTTL, MaxCacheWait: shortMaxWait,
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	return proxy
}

// scaleUnderLag runs one step of issue 7's scenario: with the watches of
// lagging resources held back by watchLag, scale(to) and keep the lag on for
// its whole length (well past the expectations TTL and the wait cap), then
// lift it and wait for the controllers to settle. Live pods, seen through a
// client that bypasses the proxy, must stay within [lo, hi] at every change.
func scaleUnderLag(ctx context.Context, t *testing.T, proxy *faultproxy.Proxy, pods *harness.PodWatch, lagging []string, to, lo, hi int, scale func()) {
	t.Helper()
	var rules []faultproxy.Rule
	for _, r := range lagging {
		rules = append(rules, faultproxy.Rule{Resource: r, Verb: "watch", WatchDelay: watchLag})
	}
	proxy.SetRules(rules...)
	pods.Reset()
	scale()
	pods.WaitLive(t, to, watchLag+time.Minute)
	// The fault lasts watchLag from the scale; every chunk already held back
	// is still delivered late after the rules are lifted.
	time.Sleep(watchLag)
	proxy.SetRules()
	waitSettled(ctx, t, pods, to)
	if minLive, maxLive, _, _ := pods.Window(); minLive < lo || maxLive > hi {
		t.Errorf("scaling to %d with %v watches %v late: live pods went to [%d, %d], want within [%d, %d] (%s)",
			to, lagging, watchLag, minLive, maxLive, lo, hi, pods)
	}
}

// waitSettled waits until the watch lag has drained and the ReplicaSets in
// the namespace report exactly want replicas, all of them observed by the
// ReplicaSet controller, and there are want live pods.
func waitSettled(ctx context.Context, t *testing.T, pods *harness.PodWatch, want int) {
	t.Helper()
	harness.Eventually(t, watchLag+2*time.Minute, "the controllers to settle", func(ctx context.Context) (bool, error) {
		return settled(ctx, want, pods)
	})
}

func settled(ctx context.Context, want int, pods *harness.PodWatch) (bool, error) {
	if pods.Now().Live != want {
		return false, nil
	}
	rss, err := env.Client.AppsV1().ReplicaSets(pods.Namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	var spec, status int32
	for _, rs := range rss.Items {
		if rs.Status.ObservedGeneration < rs.Generation {
			return false, nil
		}
		spec += *rs.Spec.Replicas
		status += rs.Status.Replicas
	}
	return int(spec) == want && int(status) == want, nil
}

// TestLaggingPodWatchReplicaSet is issue 7's first finding with the clocks
// shortened (IM-4, kubernetes#129795): a ReplicaSet of 10 pods, the
// controllers' pod watch 15s late (TTL 4s, wait cap 2s), scaled to 15 and
// back to 10. Before the read-your-writes guard held past the TTL this
// reached 20 live pods, and 8 on the way down.
func TestLaggingPodWatchReplicaSet(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	proxy := startControllers(t)
	rs := harness.NewReplicaSet(ns, "web", 10)
	if _, err := env.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := harness.WatchPods(t, env.Client, ns, labels.SelectorFromSet(rs.Spec.Selector.MatchLabels))
	waitSettled(ctx, t, pods, 10)
	lagging := []string{"pods"}
	scaleUnderLag(ctx, t, proxy, pods, lagging, 15, 10, 15, func() { harness.ScaleReplicaSet(ctx, t, env.Client, ns, "web", 15) })
	scaleUnderLag(ctx, t, proxy, pods, lagging, 10, 10, 15, func() { harness.ScaleReplicaSet(ctx, t, env.Client, ns, "web", 10) })
}

// TestLaggingWatchesDeployment is the same for a Deployment, with both the
// pod and the ReplicaSet watches late, so the Deployment controller's own
// ReplicaSet writes are not in its cache either: scaled 10 → 15 → 10, then
// rolled out to a new template, the surge and availability bounds are
// checked at every ReplicaSet change and pods at every pod change.
//
// The Deployment uses kubedeploy.io/pod-replacement-policy: TerminationComplete
// (IM-7), the only setting that promises a pod-level bound, so the rollout
// must keep live + terminating pods within replicas + maxSurge even under the
// lag. Without it, as upstream, only ReplicaSet specs are bounded: the
// ReplicaSet controller, its ReplicaSet watch late, does not yet see another
// controller's scale-down of the old ReplicaSet and keeps its pods while the
// new ones start (seen once: 14 live pods for replicas + maxSurge = 13).
func TestLaggingWatchesDeployment(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 8*time.Minute)
	proxy := startControllers(t)
	d := harness.NewDeployment(ns, "web", 10, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)
	pods := harness.WatchPods(t, env.Client, ns, labels.SelectorFromSet(d.Spec.Selector.MatchLabels))
	lagging := []string{"pods", "replicasets"}
	scaleUnderLag(ctx, t, proxy, pods, lagging, 15, 10, 15, func() { harness.ScaleDeployment(ctx, t, env.Client, ns, "web", 15) })
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)
	scaleUnderLag(ctx, t, proxy, pods, lagging, 10, 10, 15, func() { harness.ScaleDeployment(ctx, t, env.Client, ns, "web", 10) })
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)

	// A rollout under the same lag: 25% of 10 is maxSurge 3, maxUnavailable 2.
	watch := harness.WatchRollout(t, env.Client, ns, "web", harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	proxy.SetRules(faultproxy.Rule{Resource: "pods", Verb: "watch", WatchDelay: watchLag},
		faultproxy.Rule{Resource: "replicasets", Verb: "watch", WatchDelay: watchLag})
	pods.Reset()
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:1.9.3")
	time.Sleep(watchLag) // the fault's length
	proxy.SetRules()
	harness.WaitComplete(t, env.Client, ns, "web", 3*time.Minute)
	watch.Stop()
	watch.Check(2)
	if _, _, maxPresent, _ := pods.Window(); maxPresent > 13 {
		t.Errorf("rollout under lag with TerminationComplete: %d live + terminating pods, above replicas + maxSurge = 13 (%s)", maxPresent, pods)
	}
	if n := len(harness.OwnedReplicaSets(ctx, t, env.Client, harness.WaitComplete(t, env.Client, ns, "web", time.Second))); n != 2 {
		t.Errorf("%d ReplicaSets after one rollout, want 2 (one per template)", n)
	}
}
