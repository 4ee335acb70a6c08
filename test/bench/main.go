// Command bench measures kubedeploy's Deployment and ReplicaSet controllers side by side with upstream
// kube-controller-manager's (issue 10). It is a benchmark, not a pass/fail test: it prints a table and exits 0
// unless the measurement itself could not be made.
//
// It builds three binaries (kubedeploy, kubedeploy-controllers and the test-only upstreamkcm, which is
// kube-controller-manager from the k8s.io/kubernetes version kubedeploy embeds), starts one
// `kubedeploy up --controllers=` cluster (its kube-controller-manager trimmed to benchKubeControllers, the generic
// controllers `up` ran before issue 22, so the cluster does the same work as when docs/performance.md's figures were
// measured), and then, for each repetition and each client rate limit ("default":
// 20 requests/s, burst 30, both sides' default; "lifted": 5000/10000), runs each side's controllers as their own
// child process, one side at a time (the order alternates between repetitions), through the same phases on an
// N-replica Deployment in a namespace of its own:
//
//	create       a RollingUpdate (25%/25%) Deployment, until N replicas are available
//	rolling      a new image, until the rollout is complete
//	scale-down   to N/10, until the Deployment reports N/10 replicas
//	scale-up     back to N, until N are available
//	recreate     the strategy switched to Recreate together with a new image, until complete
//
// With -mode many it runs instead the many-Deployments scale test on the clusterloader2 load-test mix of -pods
// pods (default 10,000): a quarter of the pods in big Deployments (250 replicas), a quarter in medium (30), half
// in small (5), so 10 big, 84 medium and 1,000 small Deployments, 10,020 pods:
//
//	create       every Deployment (32 requests in flight), until all are complete
//	scale        each to a random size in [N/2, 3N/2] (the same seeded draw for every run and side)
//	rolling      a new image on every Deployment, until all are complete
//	delete       every Deployment (background propagation), until no ReplicaSet and no pod is left
//
// and reports, besides the figures below, the controllers' RSS settled 5 s after each phase and the bytes per
// cached pod: that RSS minus the RSS after the warm-up (no pods), divided by the pods. -nodes defaults to enough
// 1,000-pod KWOK nodes for the scenario's peak (14 for 10,000 pods); -qps to lifted.
//
// With -mode idle it measures instead what an idle `kubedeploy up` (its own controllers, its default
// kube-controller-manager controllers, -nodes KWOK nodes, no workload) costs: the process's CPU-seconds over 30 s and its RSS, after a minute to settle, once per run.
//
// With -mode shards it compares, in one run against one cluster, one unsharded `kubedeploy-controllers` with 2 and
// 3 sharded replicas (--sharding, 12 buckets, the default, each side with a ring of its own) and a floor: test/bench/floor,
// a program that runs only the informers the controllers run (same types, same pod transform, no controller),
// beside an unmeasured unsharded kubedeploy that performs the rollout; on request (-shard-sides …,upstream) also
// kube-controller-manager's own Deployment and ReplicaSet controllers on the same workload. The workload is -namespaces namespaces
// ns-001… (default 120) with one Deployment each, -pods pods in all (default 10,000), created, with their pods,
// before the measured sides start (so a ring is measured with them). Each side is first measured idle (started on
// the cluster before the workload exists, ready, settled 5 s: its idle baseline); then, one side at a time, it is
// started on the workload, waited for until ready (sharded: every bucket running, the same for two polls, every
// pod cached), settled 5 s (RSS, and the live heap after two forced collections), and measured through a rollout of every
// Deployment (a new image, until all are complete): its CPU-seconds and bytes read per process, the rollout's
// wall time, the `up` process's CPU (the API server and the rest of the cluster), the API server's watch
// events, and the writes it counted to Deployments, ReplicaSets and pods by kind (apiserver_request_total, the
// bench's own image changes included) with their 409s; then stopped before the next starts. It prints a table per
// side, the floor's CPU beside each replica's, and issue 35's Done-when ratios (sharded ÷ unsharded), which it
// reports, not asserts. -shard-sides picks the sides (unsharded first), -shard-concurrency the --concurrent-*-syncs
// given to the sharded replicas (the fleet's; default: not given, 5 as the unsharded replica's), -profile a CPU profile of each replica's (and the floor's)
// whole rollout, back-to-back 30 s windows merged. With -profile, the report ends with each profile's CPU by bucket (cpubreakdown.go).
//
// Each repetition also measures B, the raw pod-create rate of the cluster: N bare pods created by 32 concurrent
// unthrottled clients (pods no scheduler or kubelet takes, so only the API server and etcd work).
//
// Per phase and side it records the wall time, the controller process's CPU-seconds (utime+stime from /proc) and
// peak RSS (VmRSS sampled every 250 ms), the writes kube-apiserver counted (apiserver_request_total, verbs POST, PUT,
// PATCH, DELETE and APPLY on deployments and replicasets with their subresources, and on pods; the bench's own
// writes are subtracted), the 409 Conflict responses on those resources, and how many times a ReplicaSet's
// spec.replicas went down (scale-down steps). The table gives medians over repetitions, kubedeploy ÷ upstream per
// row, and the time ÷ its write bound: the pod creates and deletes the phase needs at least, divided by B.
//
// Usage (from the repository root). One lifted repetition of both sides at N=1000 took about 4 minutes on 2
// cores; the default rate limit (20 requests/s) is slower, so 3 repetitions of both are estimated at an hour:
//
//	go run ./test/bench -replicas 1000 -runs 3
//	go run ./test/bench -replicas 1000 -runs 6 -qps lifted -json /tmp/bench.json
//	go run ./test/bench -mode many -runs 3
//	go run ./test/bench -mode shards -runs 1
//
// CI runs it once at -replicas 20 and once at -mode many -pods 200 so it does not rot.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.replicas, "replicas", 1000, "N, the Deployment's replicas (at least 10)")
	flag.IntVar(&o.runs, "runs", 3, "repetitions; each runs every rate limit for both sides")
	flag.StringVar(&o.qps, "qps", "", "client rate limits to run: default (20/30), lifted (5000/10000) (default: both in single mode, lifted in many)")
	flag.StringVar(&o.sides, "sides", "kubedeploy,upstream", "controllers to measure: kubedeploy, upstream, observe (kubedeploy-controllers observe, following upstream's controllers run beside it unmeasured)")
	flag.StringVar(&o.mode, "mode", modeSingle, "scenario: single (one -replicas Deployment), many (the clusterloader2 load mix of -pods pods), shards (unsharded against 2 and 3 sharded replicas and the informers-only floor, -pods pods in -namespaces namespaces) or idle (the whole `kubedeploy up`, idle)")
	flag.IntVar(&o.pods, "pods", 10000, "pods of the many-Deployments mode (at least 100) and of the shards mode")
	flag.StringVar(&o.shardSides, "shard-sides", "unsharded,sharded-2,sharded-3,floor", "sides of the shards mode, run in this order; the first must be unsharded (the ratios' base); upstream (kube-controller-manager's own controllers, one replica) can be added")
	flag.IntVar(&o.shardConcurrency, "shard-concurrency", 0, "--concurrent-deployment-syncs and --concurrent-replicaset-syncs given to each sharded replica, the fleet's: each runs its share of them, at least 1 (default 0: not given, the default 5; the unsharded replica runs 5 of each)")
	flag.StringVar(&o.upArgs, "up-args", "", "more arguments for the measured cluster's `kubedeploy up`, space-separated (e.g. --feature-gates=ShardedListAndWatch=false: the shards mode with client-side filtering only)")
	flag.StringVar(&o.oursArgs, "kubedeploy-args", "", "more arguments for kubedeploy's controllers (every kubedeploy side, sharded replicas included; not upstream's), space-separated (e.g. --gc-percent=100: the memory policy's trade-off, docs/performance.md)")
	flag.StringVar(&o.controllerEnv, "controller-env", "", "environment added to every controllers process of every side (kubedeploy, upstream, the floor and, in the shards mode, the floor's driver; not the cluster, not the bench, not observe mode's unmeasured upstream), space-separated KEY=value (e.g. GOMAXPROCS=1 or GOMEMLIMIT=64MiB: Go runtime settings read beside upstream's)")
	flag.IntVar(&o.namespaces, "namespaces", 120, "namespaces of the shards mode (ns-001…), one Deployment each")
	flag.IntVar(&o.nodes, "nodes", 0, "KWOK nodes of the cluster, 1,000 pods each (default: enough for the scenario's peak, at least 3)")
	flag.StringVar(&o.workDir, "work-dir", "", "directory for binaries, the cluster's data dir and the controllers' logs (default: a new temporary directory, removed on success)")
	flag.StringVar(&o.jsonOut, "json", "", "also write every measurement to this file as JSON")
	flag.BoolVar(&o.profile, "profile", false, "save a CPU profile and an allocation profile of each phase's first 30 s of both sides' controllers (their /debug/pprof/profile and allocs) in the work dir, <namespace>-pprof/<phase>.pprof and .allocs; in shards mode a CPU profile of each replica's (and the floor's) whole rollout, back-to-back 30 s windows merged, <side>-<i>-pprof/rollout.pprof (the windows in rollout-windows/); the report ends with each profile's CPU by bucket (GC, decode, HTTP/TLS, events, informer, sync, scheduler)")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 20*time.Minute, "give up on a phase after this long")
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	replicas, runs, nodes int
	pods, namespaces      int
	mode, qps, sides      string
	shardSides            string
	shardConcurrency      int
	upArgs, oursArgs      string
	controllerEnv         string
	workDir, jsonOut      string
	phaseTimeout          time.Duration
	profile               bool
}

// rateLimits maps the -qps names to client rate limits (requests/s, burst).
var rateLimits = map[string]rateLimit{
	"default": {Name: "default", QPS: 20, Burst: 30},
	"lifted":  {Name: "lifted", QPS: 5000, Burst: 10000},
}

// rateLimit is a controller client rate limit: QPS in requests/s, Burst in requests.
type rateLimit struct {
	Name  string
	QPS   float32
	Burst int
}

// validate returns an error naming the first invalid flag.
func (o options) validate() error {
	switch {
	case o.mode == modeSingle && o.replicas < 10:
		return fmt.Errorf("-replicas must be at least 10, got %d", o.replicas)
	case o.runs < 1:
		return fmt.Errorf("-runs must be at least 1, got %d", o.runs)
	case o.mode != modeSingle && o.mode != modeMany && o.mode != modeIdle && o.mode != modeShards:
		return fmt.Errorf("-mode: unknown mode %q (want %s, %s, %s, %s)", o.mode, modeSingle, modeMany, modeShards, modeIdle)
	case o.mode == modeMany && o.pods < 100:
		return fmt.Errorf("-pods must be at least 100, got %d", o.pods)
	case o.mode == modeShards && (o.namespaces < 1 || o.pods < o.namespaces):
		return fmt.Errorf("-namespaces must be at least 1 and at most -pods, got %d namespaces and %d pods", o.namespaces, o.pods)
	case o.mode == modeShards && o.shardConcurrency < 0:
		return fmt.Errorf("-shard-concurrency must be 0 (the default) or more, got %d", o.shardConcurrency)
	case o.nodes < 0:
		return fmt.Errorf("-nodes must not be negative, got %d", o.nodes)
	case o.nodes > 0 && o.peakPods() > o.nodes*1000:
		return fmt.Errorf("the %s scenario holds up to %d pods during a rollout: more than -nodes %d (1,000 pods each) take", o.mode, o.peakPods(), o.nodes)
	}
	for _, kv := range strings.Fields(o.controllerEnv) {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("-controller-env: %q is not KEY=value", kv)
		}
	}
	for _, q := range o.rateLimits() {
		if q.Name == "" {
			return fmt.Errorf("-qps: unknown rate limit in %q (want default, lifted)", o.qps)
		}
	}
	if o.mode == modeShards {
		if _, err := o.shardSideList(); err != nil {
			return err
		}
	}
	for _, s := range o.sideNames() {
		if s != sideOurs && s != sideUpstream && s != sideObserve {
			return fmt.Errorf("-sides: unknown side %q (want %s, %s, %s)", s, sideOurs, sideUpstream, sideObserve)
		}
	}
	return nil
}

// peakPods is the most pods the scenario holds at once: the Deployment, or the fleet, in mid-rollout with its
// whole 25% surge.
func (o options) peakPods() int {
	switch o.mode {
	case modeMany:
		return peakPods(o.pods)
	case modeShards:
		return newShardWorkload(o.pods, o.namespaces).peak()
	}
	return o.replicas + (o.replicas+3)/4
}

// nodeCount is -nodes, or when it is 0 enough 1,000-pod nodes for the peak with a tenth to spare (pods being
// deleted still hold their place), at least 3.
func (o options) nodeCount() int {
	if o.nodes > 0 {
		return o.nodes
	}
	return max(3, (o.peakPods()*11/10+999)/1000)
}

// probePods is how many bare pods the raw pod-create probe creates: the scenario's pods.
func (o options) probePods() int {
	if o.mode == modeMany {
		return podsOf(fleet(o.pods))
	}
	return o.replicas
}

func (o options) rateLimits() []rateLimit {
	qps := o.qps
	switch {
	case qps != "":
	case o.mode == modeMany:
		qps = "lifted"
	default:
		qps = "default,lifted"
	}
	var out []rateLimit
	for _, n := range strings.Split(qps, ",") {
		out = append(out, rateLimits[strings.TrimSpace(n)])
	}
	return out
}

func (o options) sideNames() []string {
	var out []string
	for _, s := range strings.Split(o.sides, ",") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// run builds the binaries, starts the cluster, runs every repetition and prints the table.
func run(ctx context.Context, o options) (err error) {
	work := o.workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "kubedeploy-bench-"); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				_ = os.RemoveAll(work)
			} else {
				fmt.Fprintf(os.Stderr, "bench: logs kept in %s\n", work)
			}
		}()
	}
	logf("building binaries into %s", work)
	bins, err := build(ctx, work)
	if err != nil {
		return err
	}
	bins.oursArgs, bins.env = strings.Fields(o.oursArgs), strings.Fields(o.controllerEnv)
	if o.mode == modeIdle {
		return runIdle(ctx, bins, work, o)
	}
	if o.profile {
		// After the cluster's stop (deferred below) and before the work dir's removal.
		defer func() {
			if err == nil {
				err = printBreakdowns(os.Stdout, work)
			}
		}()
	}
	cl, err := startCluster(ctx, bins, work, o.nodeCount(), false, strings.Fields(o.upArgs)...)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cl.stop(); err == nil {
			err = stopErr
		}
	}()
	logf("cluster up: %s (%s)", cl.server, machine())
	if o.mode == modeShards {
		return runShards(ctx, cl, bins, o)
	}
	return runPhases(ctx, cl, bins, o)
}

// runPhases runs the single and many modes' repetitions on cl and prints the table.
func runPhases(ctx context.Context, cl *cluster, bins binaries, o options) error {
	var results []result
	var probes []probe
	for rep := range o.runs {
		p, err := probeCreates(ctx, cl, fmt.Sprintf("probe-%d", rep), o.probePods())
		if err != nil {
			return err
		}
		probes = append(probes, p)
		logf("run %d: B = %.0f pod creates/s (%d pods in %s)", rep, p.rate(), p.Pods, p.Took.Round(time.Millisecond))
		for _, q := range o.rateLimits() {
			sides := o.sideNames()
			if rep%2 == 1 {
				slices.Reverse(sides)
			}
			for _, side := range sides {
				rs, err := measure(ctx, cl, bins, side, q, rep, o)
				if err != nil {
					return fmt.Errorf("run %d, %s, %s QPS: %w", rep, side, q.Name, err)
				}
				results = append(results, rs...)
			}
		}
	}
	return printReport(o, probes, results)
}

// printReport prints the report of the runs to stdout and, with -json, writes
// the probes and results to that file; it returns the file's write error.
func printReport(o options, probes []probe, results []result) error {
	rep := newReport(o.probePods(), probes, results)
	fmt.Println()
	if o.mode == modeMany {
		f := fleet(o.pods)
		fmt.Printf("kubedeploy bench: many Deployments (%d, %d pods; rescaled to %d pods), %d nodes, %d run(s), %s\n",
			len(f), podsOf(f), podsOf(rescaled(f)), o.nodeCount(), o.runs, machine())
	} else {
		fmt.Printf("kubedeploy bench: N=%d, %d nodes, %d run(s), %s\n", o.replicas, o.nodeCount(), o.runs, machine())
	}
	rep.print(os.Stdout)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(struct {
			Mode     string
			Replicas int
			Pods     int
			Nodes    int
			Machine  string
			Probes   []probe
			Results  []result
		}{o.mode, o.replicas, o.probePods(), o.nodeCount(), machine(), probes, results}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonOut, b, 0o644)
	}
	return nil
}

// logf prints a progress line to stderr with the time of day.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
