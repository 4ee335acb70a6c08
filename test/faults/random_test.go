package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/faultproxy"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// ciRollouts is how many rollouts TestRandomizedRolloutsUnderFaults runs by
// default; KUBEDEPLOY_FAULT_ROLLOUTS sets another number (the long mode run
// by hand uses 200) and KUBEDEPLOY_FAULT_SEED replays a run.
const ciRollouts = 20

// apiErrors answers about 10% of the controllers' non-watch requests with an
// error: half before the request reaches kube-apiserver, half after it did
// (the write happened, the controller sees a 500), plus a few 504s.
var apiErrors = []faultproxy.Rule{
	{ErrorFraction: 0.04, Fault: faultproxy.InternalError, AfterForward: true},
	{ErrorFraction: 0.04, Fault: faultproxy.InternalError},
	{ErrorFraction: 0.02, Fault: faultproxy.Timeout, TimeoutAfter: 100 * time.Millisecond, AfterForward: true},
}

// TestRandomizedRolloutsUnderFaults runs seeded random rolling updates
// (replicas 1-10, maxSurge and maxUnavailable 0-3) while ~10% of the
// controllers' API requests fail and the controllers are restarted at random
// moments of half the rollouts. At every ReplicaSet change, seen through a
// client that bypasses the proxy: Σ spec ≤ replicas + maxSurge (RU-10),
// available ≥ replicas − maxUnavailable (RU-11, IM-6), one ReplicaSet per
// template (RV-1); at the end the Deployment is complete, every pod is
// controlled by one of its ReplicaSets and no ReplicaSet is lost or extra.
func TestRandomizedRolloutsUnderFaults(t *testing.T) {
	rollouts := ciRollouts
	if s := os.Getenv("KUBEDEPLOY_FAULT_ROLLOUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("KUBEDEPLOY_FAULT_ROLLOUTS=%q: want a positive number", s)
		}
		rollouts = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KUBEDEPLOY_FAULT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KUBEDEPLOY_FAULT_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with KUBEDEPLOY_FAULT_SEED=%d), %d rollouts", seed, seed, rollouts)
	rng := rand.New(rand.NewPCG(seed, seed))
	ns := env.Namespace(t)
	ctx := harness.Context(t, time.Duration(rollouts)*3*time.Minute)
	proxy, err := faultproxy.Start(ctx, env.Config, faultproxy.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	proxy.SetRules(apiErrors...)
	c := &restartable{cfg: manager.Config{RESTConfig: proxy.Config(), ExpectationsTimeout: shortTTL, MaxCacheWait: shortMaxWait}}
	c.start()
	t.Cleanup(func() { c.stopNow(t) })
	restarts := 0
	for i := range rollouts {
		restarts += randomRollout(ctx, t, rng, ns, fmt.Sprintf("r%03d", i), c)
		if t.Failed() {
			t.Fatalf("rollout %d failed; replay with KUBEDEPLOY_FAULT_SEED=%d", i, seed)
		}
	}
	st := proxy.Stats()
	t.Logf("%d rollouts, %d controller restarts, %d faults injected (%v), 0 bound violations", rollouts, restarts, sum(st.Faults), st.Faults)
}

// randomRollout creates one random Deployment, waits for it, rolls it out to
// a new image with the bounds watched, maybe restarting the controllers
// midway, checks the end state and deletes it. It returns the restarts made.
func randomRollout(ctx context.Context, t *testing.T, rng *rand.Rand, ns, name string, c *restartable) int {
	t.Helper()
	replicas, surge, unavailable := int32(1+rng.IntN(10)), int32(rng.IntN(4)), int32(rng.IntN(4))
	if surge == 0 && unavailable == 0 {
		surge = 1
	}
	d := harness.NewDeployment(ns, name, replicas, "nginx:1.9")
	s, u := intstr.FromInt32(surge), intstr.FromInt32(unavailable)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, name, 2*time.Minute)
	bounds := harness.Bounds{MaxTotal: replicas + surge, MinAvailable: replicas - min(unavailable, replicas)}
	watch := harness.WatchRolloutWith(t, env.Client, ns, name, harness.WatchOptions{Bounds: &bounds, OneNewReplicaSet: true})
	harness.SetImage(ctx, t, env.Client, ns, name, name, "nginx:1.9-"+name)
	restarts := 0
	if rng.IntN(2) == 0 {
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // a random moment of the rollout
		c.restart(t)
		restarts++
	}
	final := harness.WaitComplete(t, env.Client, ns, name, 3*time.Minute)
	watch.Stop()
	watch.Check(1)
	checkOwnership(ctx, t, final)
	if err := env.Client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return restarts
}

// checkOwnership: the Deployment owns exactly its new and its one kept old
// ReplicaSet (revisionHistoryLimit 1), and every live pod of the Deployment's
// selector is controlled by one of them.
func checkOwnership(ctx context.Context, t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	rss := harness.OwnedReplicaSets(ctx, t, env.Client, d)
	owners := map[string]bool{}
	for _, rs := range rss {
		owners[string(rs.UID)] = true
	}
	if len(rss) < 1 || len(rss) > 2 {
		t.Errorf("%s owns %d ReplicaSets, want the new one and at most one old one", d.Name, len(rss))
	}
	pods, err := env.Client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if p.DeletionTimestamp == nil && (ref == nil || !owners[string(ref.UID)]) {
			t.Errorf("pod %s is controlled by %v, not by a ReplicaSet of %s", p.Name, ref, d.Name)
		}
	}
}

// restartable runs the controllers and restarts them on demand, as a crash
// and a new process would: all in-memory state (expectations,
// read-your-writes records, caches) is lost.
type restartable struct {
	cfg  manager.Config
	stop func() error
}

func (r *restartable) start() { r.stop = env.RunControllers(r.cfg) }

func (r *restartable) restart(t *testing.T) {
	t.Helper()
	r.stopNow(t)
	r.start()
}

func (r *restartable) stopNow(t *testing.T) {
	t.Helper()
	if r.stop == nil {
		return
	}
	if err := r.stop(); err != nil {
		t.Errorf("controllers: %v", err)
	}
	r.stop = nil
}

func sum(m map[faultproxy.Fault]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
