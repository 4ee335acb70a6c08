package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// modeShards compares one unsharded replica with 2 and 3 sharded ones and the informers-only floor (-mode shards,
// issue 35).
const modeShards = "shards"

// shardBuckets is the sharded sides' --shard-buckets (the default).
const shardBuckets = 12

// shardSide is one side of the shards mode: replicas processes of kubedeploy's controllers (sharded or not), or
// the floor program.
type shardSide struct {
	name     string
	replicas int
	sharded  bool
	// floor runs test/bench/floor, beside an unmeasured unsharded kubedeploy that performs the rollout.
	floor bool
	// upstream runs kube-controller-manager's own Deployment and ReplicaSet controllers (the test-only upstreamkcm,
	// as the other modes' upstream side) instead of kubedeploy's: what the same rollout costs upstream, to set
	// beside the floor (issue 48).
	upstream bool
	// concurrency, when sharded and > 0, is the --concurrent-*-syncs each replica is given (-shard-concurrency;
	// the fleet's, each replica runs its share).
	concurrency int
}

// shardSides are the shards mode's sides, in the order they run.
var shardSides = []shardSide{
	{name: "unsharded", replicas: 1},
	{name: "sharded-2", replicas: 2, sharded: true},
	{name: "sharded-3", replicas: 3, sharded: true},
	{name: "floor", replicas: 1, floor: true},
	{name: "upstream", replicas: 1, upstream: true},
}

// shardSideList returns the sides -shard-sides names, in its order: an error names an unknown side, or a list
// that does not start with unsharded (every ratio is to it).
func (o options) shardSideList() ([]shardSide, error) {
	var out []shardSide
	for _, name := range strings.Split(o.shardSides, ",") {
		i := slices.IndexFunc(shardSides, func(s shardSide) bool { return s.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-shard-sides: unknown side %q (want unsharded, sharded-2, sharded-3, floor, upstream)", name)
		}
		side := shardSides[i]
		if side.sharded {
			side.concurrency = o.shardConcurrency
		}
		out = append(out, side)
	}
	if out[0].name != shardSides[0].name {
		return nil, fmt.Errorf("-shard-sides must start with unsharded (the ratios' base), got %q", o.shardSides)
	}
	return out, nil
}

// shardWorkload is the shards mode's Deployments: one named "app" in each namespace, replicas by namespace.
type shardWorkload map[string]int32

// newShardWorkload spreads pods over namespaces ns-001…: pods ÷ namespaces each, the first pods mod namespaces
// one more.
func newShardWorkload(pods, namespaces int) shardWorkload {
	w := shardWorkload{}
	for i := range namespaces {
		n := pods / namespaces
		if i < pods%namespaces {
			n++
		}
		w[fmt.Sprintf("ns-%03d", i+1)] = int32(n)
	}
	return w
}

// pods is the workload's replicas added up.
func (w shardWorkload) pods() int {
	n := 0
	for _, r := range w {
		n += int(r)
	}
	return n
}

// peak is the most pods the workload holds with every Deployment in mid-rollout with its whole 25% surge.
func (w shardWorkload) peak() int {
	n := 0
	for _, r := range w {
		n += int(r) + (int(r)+3)/4
	}
	return n
}

// create creates the namespaces and their Deployments (revisionHistoryLimit 1, so that every side starts with
// the same ReplicaSets: the current one and one old), manyWorkers at a time.
func (w shardWorkload) create(ctx context.Context, cl *cluster) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(manyWorkers)
	for ns, r := range w {
		g.Go(func() error {
			if err := createNamespace(ctx, cl.client, ns); err != nil {
				return err
			}
			d := deployment(ns, "app", r)
			d.Spec.RevisionHistoryLimit = new(int32(1))
			_, err := cl.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			return err
		})
	}
	return g.Wait()
}

// roll sets every Deployment's image to image, manyWorkers at a time.
func (w shardWorkload) roll(ctx context.Context, cl *cluster, image string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(manyWorkers)
	for ns := range w {
		g.Go(func() error {
			_, err := cl.client.AppsV1().Deployments(ns).Patch(ctx, "app", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
	}
	return g.Wait()
}

// wait watches every Deployment of the cluster and returns once each of w's is complete at its replicas
// (complete), checking every 500 ms; it fails when alive does, or after timeout, naming those not complete.
func (w shardWorkload) wait(ctx context.Context, cl *cluster, alive func() error, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cl.client, 0)
	inf := factory.Apps().V1().Deployments().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("deployment watch did not sync")
	}
	var waiting []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		waiting = waiting[:0]
		for ns, r := range w {
			obj, ok, _ := inf.GetStore().GetByKey(ns + "/app")
			if !ok || !complete(obj.(*appsv1.Deployment), r) {
				waiting = append(waiting, ns)
			}
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d Deployments not complete (in %s): %w", len(waiting), len(w), firstFew(waiting), err)
	}
	return nil
}

// runShards runs the shards mode: each side's idle baseline on the cluster before the workload exists, then the
// workload (its pods created by an unmeasured unsharded kubedeploy), then, per repetition, each side in turn
// (started, synced and balanced, settled, measured through a rollout of every Deployment, stopped), and prints
// the report.
func runShards(ctx context.Context, cl *cluster, bins binaries, o options) error {
	w := newShardWorkload(o.pods, o.namespaces)
	sides, err := o.shardSideList()
	if err != nil {
		return err
	}
	idle := map[string][]replicaResult{}
	for _, s := range sides {
		rs, err := measureIdle(ctx, cl, bins, s, o)
		if err != nil {
			return fmt.Errorf("idle %s: %w", s.name, err)
		}
		idle[s.name] = rs
	}
	logf("creating %d namespaces with one Deployment each, %d pods", len(w), w.pods())
	if err := w.create(ctx, cl); err != nil {
		return err
	}
	if err := drive(ctx, cl, bins, "setup", func(alive func() error) error {
		return w.wait(ctx, cl, alive, o.phaseTimeout)
	}); err != nil {
		return fmt.Errorf("creating the workload's pods: %w", err)
	}
	var results []sideResult
	for run := range o.runs {
		for i, s := range sides {
			image := fmt.Sprintf("nginx:1.%d.%d", 20+run, i)
			r, err := measureShardSide(ctx, cl, bins, s, w, image, o)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", run, s.name, err)
			}
			r.Run = run
			r.attachIdle(idle[s.name])
			logSide(r)
			results = append(results, r)
		}
	}
	return printShardReport(o, w, results)
}

// drive runs an unmeasured unsharded kubedeploy (its log in <name>-driver.log) while fn runs, and stops it.
func drive(ctx context.Context, cl *cluster, bins binaries, name string, fn func(alive func() error) error) error {
	ps, err := startSide(ctx, cl, bins, shardSide{name: name + "-driver", replicas: 1}, "")
	if err != nil {
		return err
	}
	defer stopAll(ps)
	return fn(func() error { return aliveAll(ps) })
}

// startSide starts s's processes (for a sharded side, with their ring and Leases in ringNS, created if missing),
// each serving /metrics on a port of its own, their logs in <side>-<i>.log.
func startSide(ctx context.Context, cl *cluster, bins binaries, s shardSide, ringNS string) ([]*process, error) {
	if s.sharded {
		if err := createNamespace(ctx, cl.client, ringNS); err != nil && !isAlreadyExists(err) {
			return nil, err
		}
	}
	var ps []*process
	for i := range s.replicas {
		port, err := freePort()
		if err != nil {
			stopAll(ps)
			return nil, err
		}
		name, args := sideArgs(bins, s, cl.kubeconfig, ringNS, port)
		p, err := startProcess(name, args, filepath.Join(filepath.Dir(cl.dir), fmt.Sprintf("%s-%d.log", s.name, i)), append([]string{heapProfileOff()}, bins.env...)...)
		if err != nil {
			stopAll(ps)
			return nil, err
		}
		p.port, p.plain = port, s.floor
		ps = append(ps, p)
	}
	return ps, nil
}

// heapProfileOff is a measured process's GODEBUG: the bench's own, if any, with heap profiling off
// (memprofilerate=0), so that the collections liveHeapMB forces through /debug/pprof/heap write an empty profile
// (liveHeapMB says why). The profiler's records live outside the Go heap, so the live heap is the same without them.
func heapProfileOff() string {
	if v := os.Getenv("GODEBUG"); v != "" {
		return "GODEBUG=" + v + ",memprofilerate=0"
	}
	return "GODEBUG=memprofilerate=0"
}

// sideArgs is the command line of one of s's processes: the floor program, or kubedeploy's controllers as the
// bench runs them (controllerArgs, lifted rate limit) with --sharding and ringNS for a sharded side.
func sideArgs(bins binaries, s shardSide, kubeconfig, ringNS string, port int) (string, []string) {
	if s.floor { // at the GC target -kubedeploy-args gives the controllers, if any
		args := []string{"--kubeconfig=" + kubeconfig, fmt.Sprintf("--port=%d", port)}
		for _, a := range bins.oursArgs {
			if strings.HasPrefix(a, "--gc-percent=") {
				args = append(args, a)
			}
		}
		return bins.floor, args
	}
	if s.upstream {
		return controllerArgs(bins, sideUpstream, kubeconfig, rateLimits["lifted"], port)
	}
	name, args := controllerArgs(bins, sideOurs, kubeconfig, rateLimits["lifted"], port)
	if s.sharded {
		args = append(args, "--sharding", fmt.Sprintf("--shard-buckets=%d", shardBuckets),
			"--leader-elect-resource-namespace="+ringNS)
		if s.concurrency > 0 { // after controllerArgs' 5: the last value of a flag wins
			args = append(args, fmt.Sprintf("--concurrent-deployment-syncs=%d", s.concurrency), fmt.Sprintf("--concurrent-replicaset-syncs=%d", s.concurrency))
		}
	}
	return name, args
}

// stopAll stops every process (SIGTERM, then a kill after a minute) and waits for each to exit.
func stopAll(ps []*process) {
	for _, p := range ps {
		p.stop()
	}
}

// aliveAll returns the first process's error that has exited.
func aliveAll(ps []*process) error {
	for _, p := range ps {
		if err := p.alive(); err != nil {
			return err
		}
	}
	return nil
}
