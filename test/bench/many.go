package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The bench's modes (-mode).
const (
	// modeSingle runs the phases of one N-replica Deployment.
	modeSingle = "single"
	// modeMany runs the many-Deployments scale test: the clusterloader2 load mix of -pods pods.
	modeMany = "many"
)

// manyWorkers is how many of the bench's requests are in flight at once when it creates, patches or deletes the
// many Deployments.
const manyWorkers = 32

// sizeClass is one size of Deployment in clusterloader2's load test: Deployments of size replicas hold share of
// the pods.
type sizeClass struct {
	name  string
	size  int
	share float64
}

// loadMix is clusterloader2's load-test mix (testing/load/config.yaml: big 250, medium 30, small 5 replicas):
// a quarter of the pods in big Deployments, a quarter in medium, half in small.
var loadMix = []sizeClass{{"big", 250, 0.25}, {"medium", 30, 0.25}, {"small", 5, 0.5}}

// member is one Deployment of the fleet: its name and replicas.
type member struct {
	name     string
	replicas int32
}

// fleet returns the Deployments of the load mix for about pods pods: per class, ⌈share·pods ÷ size⌉
// Deployments, none when the class's share is under half its size (so a small -pods has no 250-replica
// Deployment). For 10,000 pods: 10 big, 84 medium and 1,000 small Deployments, 10,020 pods.
func fleet(pods int) []member {
	var out []member
	for _, c := range loadMix {
		share := c.share * float64(pods)
		if share < float64(c.size)/2 {
			continue
		}
		for i := range int(math.Ceil(share / float64(c.size))) {
			out = append(out, member{name: fmt.Sprintf("%s-%d", c.name, i), replicas: int32(c.size)})
		}
	}
	return out
}

// rescaled returns f with each Deployment's replicas drawn uniformly from [⌊N/2⌋, ⌊3N/2⌋] (N its replicas in f),
// as clusterloader2's scaling step does. The draw is seeded, so every run and side gets the same sizes.
func rescaled(f []member) []member {
	rng := rand.New(rand.NewPCG(10, 0))
	out := slices.Clone(f)
	for i := range out {
		lo, hi := out[i].replicas/2, out[i].replicas*3/2
		out[i].replicas = lo + rng.Int32N(hi-lo+1)
	}
	return out
}

// podsOf returns the fleet's replicas added up.
func podsOf(f []member) int {
	n := 0
	for _, m := range f {
		n += int(m.replicas)
	}
	return n
}

// peakPods is the most pods the fleet can hold at once in the bench: every Deployment of the rescaled fleet in
// mid-rollout with its whole 25% surge.
func peakPods(pods int) int {
	n := 0
	for _, m := range rescaled(fleet(pods)) {
		n += int(m.replicas) + int(math.Ceil(float64(m.replicas)/4))
	}
	return n
}

// manySteps returns the many-Deployments scenario: create the fleet, scale it to random sizes, roll it to a new
// image, delete it. Each step's done waits until every Deployment is complete at its size (or, for delete,
// until the namespace holds no ReplicaSets and no pods).
func manySteps(o options) []step {
	base := fleet(o.pods)
	scaled := rescaled(base)
	return []step{
		{name: "create", run: func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error) {
			act := func() error {
				return each(ctx, base, func(ctx context.Context, m member) error {
					_, err := cl.client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, m.name, m.replicas), metav1.CreateOptions{})
					return err
				})
			}
			r, err := observe(ctx, cl, ns, "create", p, act, func() error { return waitFleet(ctx, cl, ns, base, p, o.phaseTimeout) })
			r.Phase, r.BoundWrites, r.Pods = "create", podsOf(base), podsOf(base)
			return r, err
		}},
		{name: "scale", run: func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error) {
			act := func() error {
				return each(ctx, scaled, func(ctx context.Context, m member) error {
					patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, m.replicas)
					_, err := cl.client.AppsV1().Deployments(ns).Patch(ctx, m.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
					return err
				})
			}
			r, err := observe(ctx, cl, ns, "scale", p, act, func() error { return waitFleet(ctx, cl, ns, scaled, p, o.phaseTimeout) })
			bound := 0
			for i := range base {
				bound += int(math.Abs(float64(scaled[i].replicas - base[i].replicas)))
			}
			r.Phase, r.BoundWrites, r.Pods = "scale", bound, podsOf(scaled)
			return r, err
		}},
		{name: "rolling", run: func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error) {
			act := func() error {
				return each(ctx, scaled, func(ctx context.Context, m member) error {
					_, err := cl.client.AppsV1().Deployments(ns).Patch(ctx, m.name, types.StrategicMergePatchType, []byte(phases[1].patch), metav1.PatchOptions{})
					return err
				})
			}
			r, err := observe(ctx, cl, ns, "rolling", p, act, func() error { return waitFleet(ctx, cl, ns, scaled, p, o.phaseTimeout) })
			r.Phase, r.BoundWrites, r.Pods = "rolling", 2*podsOf(scaled), podsOf(scaled)
			return r, err
		}},
		{name: "delete", run: func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error) {
			bg := metav1.DeletePropagationBackground
			act := func() error {
				return each(ctx, scaled, func(ctx context.Context, m member) error {
					return cl.client.AppsV1().Deployments(ns).Delete(ctx, m.name, metav1.DeleteOptions{PropagationPolicy: &bg})
				})
			}
			r, err := observe(ctx, cl, ns, "delete", p, act, func() error { return waitEmpty(ctx, cl, ns, p, o.phaseTimeout) })
			r.Phase, r.BoundWrites, r.Pods = "delete", podsOf(scaled), 0
			return r, err
		}},
	}
}

// each calls fn for every member, manyWorkers at a time, and returns the first error.
func each(ctx context.Context, f []member, fn func(context.Context, member) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(manyWorkers)
	for _, m := range f {
		g.Go(func() error {
			if err := fn(ctx, m); err != nil {
				return fmt.Errorf("deployment %s: %w", m.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// waitFleet watches the Deployments of ns and returns once every member is complete at its replicas (status for
// the current generation; replicas, updated and available replicas all equal to its size), checking every
// 250 ms. It fails when the controllers exit or after timeout, naming how many Deployments were not complete.
func waitFleet(ctx context.Context, cl *cluster, ns string, f []member, p *process, timeout time.Duration) error {
	watchCtx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cl.client, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().Deployments().Informer()
	factory.Start(watchCtx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informer, which stops on cancel
	ctx = watchCtx
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("deployment watch in %s did not sync", ns)
	}
	var waiting []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		waiting = waiting[:0]
		for _, m := range f {
			obj, ok, _ := inf.GetStore().GetByKey(ns + "/" + m.name)
			if !ok || !complete(obj.(*appsv1.Deployment), m.replicas) {
				waiting = append(waiting, m.name)
			}
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d Deployments in %s not complete (%s): %w", len(waiting), len(f), ns, firstFew(waiting), err)
	}
	return nil
}

// complete reports whether d's status is for its current generation with replicas, updated and available
// replicas all equal to replicas.
func complete(d *appsv1.Deployment, replicas int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == replicas && s.UpdatedReplicas == replicas &&
		s.AvailableReplicas == replicas
}

// waitEmpty polls every 500 ms until ns holds no ReplicaSets and no pods (the garbage collector removes them
// after their Deployments), or fails after timeout or when the controllers exit.
func waitEmpty(ctx context.Context, cl *cluster, ns string, p *process, timeout time.Duration) error {
	one := metav1.ListOptions{Limit: 1}
	var left string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		rss, err := cl.client.AppsV1().ReplicaSets(ns).List(ctx, one)
		if err != nil || len(rss.Items) > 0 {
			left = "ReplicaSets"
			return false, nil
		}
		pods, err := cl.client.CoreV1().Pods(ns).List(ctx, one)
		if err != nil || len(pods.Items) > 0 {
			left = "pods"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s still holds %s: %w", ns, left, err)
	}
	return nil
}

// firstFew returns up to five of names, joined, with "…" when there are more.
func firstFew(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:5], ", ") + ", …"
}
