package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// idleSide is s as measureIdle starts it: the same processes with the same flags (--concurrent-*-syncs included),
// named idle-<side>, so that the idle baseline subtracted from the rollout's figures is that of what is measured.
func idleSide(s shardSide) shardSide {
	s.name = "idle-" + s.name
	return s
}

// measureIdle starts s on the cluster as it is before the workload (a sharded side with a ring of its own,
// bench-idle-<side>), waits until it is ready (waitReady), settles and returns each replica's RSS and live heap
// as its idle baseline (IdleRSSMB, IdleHeapMB), then stops it.
func measureIdle(ctx context.Context, cl *cluster, bins binaries, s shardSide, o options) ([]replicaResult, error) {
	ps, err := startSide(ctx, cl, bins, idleSide(s), "bench-idle-"+s.name)
	if err != nil {
		return nil, err
	}
	defer stopAll(ps)
	if err := waitReady(ctx, cl, s, ps, o.phaseTimeout); err != nil {
		return nil, err
	}
	rs, err := settledFigures(ctx, cl, s, ps)
	for i := range rs {
		rs[i].IdleRSSMB, rs[i].IdleHeapMB = rs[i].RSSMB, rs[i].HeapMB
	}
	logf("idle %-10s RSS %s MB, heap %s MB", s.name, joinFigures(rs, func(r replicaResult) float64 { return r.IdleRSSMB }),
		joinFigures(rs, func(r replicaResult) float64 { return r.IdleHeapMB }))
	return rs, err
}

// measureShardSide starts s (a sharded side with its ring in bench-ring-<side>; the floor beside an unmeasured
// unsharded kubedeploy that performs the rollout), waits until it is ready and settled, reads each replica's
// figures, then sets every Deployment's image to image and measures until every rollout is complete: the wall
// time, each replica's CPU and bytes read, the cluster's CPU and the API server's watch events. It stops s
// before it returns.
func measureShardSide(ctx context.Context, cl *cluster, bins binaries, s shardSide, w shardWorkload, image string, o options) (sideResult, error) {
	r := sideResult{Side: s.name, Pods: w.pods()}
	var driver []*process
	if s.floor {
		var err error
		if driver, err = startSide(ctx, cl, bins, shardSide{name: "floor-driver", replicas: 1}, ""); err != nil {
			return r, err
		}
		defer stopAll(driver)
	}
	ps, err := startSide(ctx, cl, bins, s, "bench-ring-"+s.name)
	if err != nil {
		return r, err
	}
	defer stopAll(ps)
	if err := waitReady(ctx, cl, s, append(slices.Clone(ps), driver...), o.phaseTimeout); err != nil {
		return r, err
	}
	if r.Replicas, err = settledFigures(ctx, cl, s, ps); err != nil {
		return r, err
	}
	pods, err := clusterPods(ctx, cl.client)
	if err != nil {
		return r, err
	}
	if !s.sharded && !s.floor {
		for i := range r.Replicas {
			r.Replicas[i].CachedPods = pods
		}
	}
	alive := func() error { return aliveAll(append(slices.Clone(ps), driver...)) }
	if o.profile {
		for i, p := range ps {
			if err := p.profileInto(filepath.Join(filepath.Dir(cl.dir), fmt.Sprintf("%s-%d-pprof", s.name, i))); err != nil {
				return r, err
			}
		}
	}
	stop := make(chan struct{})
	var profiled []<-chan struct{}
	err = rollout(ctx, cl, ps, &r, func() error {
		defer close(stop)
		if err := w.roll(ctx, cl, image); err != nil {
			return err
		}
		// -profile: each replica's CPU profile of the whole rollout (a diagnostic; waited for below, after the
		// rollout's figures are read, so that it does not lengthen them).
		for _, p := range ps {
			profiled = append(profiled, p.profileWhole(ctx, cl, "rollout", stop))
		}
		return w.wait(ctx, cl, alive, o.phaseTimeout)
	})
	for _, done := range profiled {
		<-done
	}
	return r, err
}

// rollout runs act, which returns once the rollout is complete, and records in r its wall time and what the
// cluster and each of ps spent meanwhile.
func rollout(ctx context.Context, cl *cluster, ps []*process, r *sideResult, act func() error) error {
	before, err := readRollout(ctx, cl, ps)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := act(); err != nil {
		return err
	}
	r.RolloutSeconds = time.Since(start).Seconds()
	after, err := readRollout(ctx, cl, ps)
	if err != nil {
		return err
	}
	r.ClusterCPUSeconds = (after.cluster - before.cluster).Seconds()
	r.WatchEvents = after.watches.sent - before.watches.sent
	r.FilteredWatchEvents = after.watches.filtered - before.watches.filtered
	r.ShardedWatches = after.watches.sharded
	t := diffRequests(before.requests, after.requests, nil)
	r.WritesBy = t.Writes
	for _, n := range t.Writes {
		r.Writes += n
	}
	for _, n := range t.Conflicts {
		r.Conflicts += n
	}
	for i := range r.Replicas {
		r.Replicas[i].RolloutCPUSeconds = (after.cpu[i] - before.cpu[i]).Seconds()
		r.Replicas[i].ReadMB = float64(after.read[i]-before.read[i]) / (1 << 20)
		r.Replicas[i].Events = after.events[i] - before.events[i]
		r.Replicas[i].ReplicaSetSyncs = after.syncs[i]["replicaset"] - before.syncs[i]["replicaset"]
		r.Replicas[i].DeploymentSyncs = after.syncs[i]["deployment"] - before.syncs[i]["deployment"]
	}
	return nil
}

// rolloutCounts are the counters a rollout is measured by, at one moment: per process its CPU time, bytes read
// (rchar), for the floor its informer notifications and for the others the syncs each queue finished (by queue
// name); the cluster's CPU time and the API server's watch events.
type rolloutCounts struct {
	cpu      []time.Duration
	read     []int64
	events   []float64
	syncs    []map[string]float64
	cluster  time.Duration
	watches  apiWatches
	requests requestCounts
}

// readRollout reads rolloutCounts now.
func readRollout(ctx context.Context, cl *cluster, ps []*process) (rolloutCounts, error) {
	var c rolloutCounts
	var err error
	if c.cluster, err = cpuOf(cl.cmd.Process.Pid); err != nil {
		return c, err
	}
	if c.requests, err = scrapeRequests(ctx, cl.client); err != nil {
		return c, err
	}
	if c.watches, err = scrapeWatchEvents(ctx, cl.client); err != nil {
		return c, err
	}
	for _, p := range ps {
		cpu, err := p.cpu()
		if err != nil {
			return c, err
		}
		read, err := readChars(p.cmd.Process.Pid)
		if err != nil {
			return c, err
		}
		events, syncs, err := processCounts(ctx, cl, p)
		if err != nil {
			return c, err
		}
		c.cpu, c.read, c.events, c.syncs = append(c.cpu, cpu), append(c.read, read), append(c.events, events), append(c.syncs, syncs)
	}
	return c, nil
}

// processCounts scrapes p's metrics: for the floor (plain) its informer notifications and no syncs; for a
// controller process no notifications and the syncs each of its workqueues finished (the count of
// workqueue_work_duration_seconds, by queue name). The error is the scrape's.
func processCounts(ctx context.Context, cl *cluster, p *process) (events float64, syncs map[string]float64, err error) {
	if p.plain {
		v, err := scrapeValues(ctx, cl.metrics, p.metricsURL())
		if err != nil {
			return 0, nil, err
		}
		return v["kubedeploy_bench_floor_events_total"], nil, nil
	}
	q, err := scrapeQueues(ctx, cl.metrics, p.metricsURL())
	if err != nil {
		return 0, nil, err
	}
	syncs = map[string]float64{}
	for name, h := range q.work {
		syncs[name] = h[math.Inf(1)]
	}
	return 0, syncs, nil
}

// ringQuiet is how long a sharded side's buckets and handovers must stay unchanged before it is measured: buckets
// move one at a time, each some seconds after the owners have counted their pods, so a few seconds without a
// move do not mean the ring has settled.
const ringQuiet = 20 * time.Second

// readyPath is where s's processes answer when ready: /readyz, or /healthz for upstream's
// kube-controller-manager, which serves no /readyz (k8s.io/controller-manager's NewBaseHandler).
func readyPath(s shardSide) string {
	if s.upstream {
		return "/healthz"
	}
	return "/readyz"
}

// waitReady polls every 2 s until s's processes ps are ready: each answers readyPath; for a sharded side, every
// bucket is running on some replica, each replica runs at least one, and neither that nor the replicas'
// handovers have changed for ringQuiet, and the replicas cache as many pods between them as the cluster holds;
// for the floor, it caches them all. It logs what it waits for every 30 s.
func waitReady(ctx context.Context, cl *cluster, s shardSide, ps []*process, timeout time.Duration) error {
	var last, state string
	var since time.Time
	logged := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if time.Since(logged) > 30*time.Second {
			logf("%s: waiting (%s)", s.name, state)
			logged = time.Now()
		}
		if err := aliveAll(ps); err != nil {
			return false, err
		}
		for _, p := range ps {
			if err := getOK(ctx, cl.metrics, strings.TrimSuffix(p.metricsURL(), "/metrics")+readyPath(s)); err != nil {
				state = err.Error()
				return false, nil
			}
		}
		if !s.sharded && !s.floor {
			return true, nil
		}
		owned, handovers, cached, sets, err := ownership(ctx, cl, ps[:s.replicas])
		pods, podsErr := clusterPods(ctx, cl.client)
		if err = errors.Join(err, podsErr); err != nil {
			state = err.Error()
			return false, nil
		}
		if key := fmt.Sprintf("%s %d", owned, handovers); key != last {
			last, since = key, time.Now()
		}
		state = fmt.Sprintf("buckets %s, %d handovers, cached pods %d of %d, sets of controllers %s", owned, handovers, cached, pods, sets)
		// A sharded replica is measured once its one set of controllers runs (SH-9: one for life, each bucket
		// with informers of its own) and the ring has been quiet for ringQuiet: every replica, not the most of
		// them (one caught with a bucket's caches being listed sets a baseline too low: 3.1 against 3.8 MB,
		// measured when sets were still merged).
		return cached == pods && (s.floor || balanced(owned, s.replicas, time.Since(since) >= ringQuiet) && oneSetEach(sets)), nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready (%s): %w", s.name, state, err)
	}
	return nil
}

// balanced reports whether the running buckets per replica, formatted "a/b/c", cover shardBuckets with at least
// one per replica, and stable says the ring has been quiet long enough.
func balanced(owned string, replicas int, stable bool) bool {
	parts := strings.Split(owned, "/")
	total := 0
	for _, s := range parts {
		n, _ := strconv.Atoi(s)
		if n == 0 {
			return false
		}
		total += n
	}
	return stable && len(parts) == replicas && total == shardBuckets
}

// ownership returns the buckets each of ps runs ("a/b/c"; for the floor, "-"), and the handovers they have
// made and the pods they cache between them (kubedeploy_shard_running_buckets, kubedeploy_shard_handovers_total,
// kubedeploy_shard_cached_pods; the floor's own count), and the sets of controllers each runs its buckets in
// ("a/b/c", kubedeploy_shard_controller_sets: 1 once a replica's set runs).
func ownership(ctx context.Context, cl *cluster, ps []*process) (owned string, handovers, cached int, sets string, err error) {
	var each, setsEach []string
	for _, p := range ps {
		v, err := scrapeValues(ctx, cl.metrics, p.metricsURL())
		if err != nil {
			return "", 0, 0, "", err
		}
		if p.plain {
			each, setsEach = append(each, "-"), append(setsEach, "-")
			cached += int(v["kubedeploy_bench_floor_cached_pods"])
			continue
		}
		each = append(each, strconv.Itoa(int(v["kubedeploy_shard_running_buckets"])))
		setsEach = append(setsEach, strconv.Itoa(int(v["kubedeploy_shard_controller_sets"])))
		handovers += int(v["kubedeploy_shard_handovers_total"])
		cached += int(v["kubedeploy_shard_cached_pods"])
	}
	return strings.Join(each, "/"), handovers, cached, strings.Join(setsEach, "/"), nil
}

// oneSetEach reports whether every replica of sets ("a/b/c", as ownership returns them) runs exactly one set.
func oneSetEach(sets string) bool {
	return !slices.ContainsFunc(strings.Split(sets, "/"), func(s string) bool { return s != "1" })
}

// heapSamples is how many times settledFigures reads each process's live heap, heapEvery apart: the median is
// its figure, and every sample is logged.
const (
	heapSamples = 5
	heapEvery   = 2 * time.Second
)

// settledFigures waits settleFor, then reads each of ps's RSS, live heap (the median of heapSamples reads of
// liveHeapMB) and, for a sharded side or the floor, the pods, namespaces and buckets it caches and owns.
func settledFigures(ctx context.Context, cl *cluster, s shardSide, ps []*process) ([]replicaResult, error) {
	if err := sleep(ctx, settleFor); err != nil {
		return nil, err
	}
	out := make([]replicaResult, len(ps))
	samples := make([][]float64, len(ps))
	for n := range heapSamples {
		if n > 0 {
			if err := sleep(ctx, heapEvery); err != nil {
				return nil, err
			}
		}
		for i, p := range ps {
			v, heap, err := liveHeapMB(ctx, cl.metrics, p.metricsURL())
			if err != nil {
				return nil, err
			}
			samples[i] = append(samples[i], heap)
			if n == 0 {
				rss, err := readRSS(p.cmd.Process.Pid)
				if err != nil {
					return nil, err
				}
				out[i] = replicaResult{Side: s.name, Replica: i, RSSMB: float64(rss) / 1024}
				out[i].readCache(v)
			}
		}
	}
	var logged []string
	for i := range out {
		out[i].HeapMB = median(samples[i])
		logged = append(logged, joinMB(samples[i]))
	}
	logf("%s live heap samples (MB), per process: %s", s.name, strings.Join(logged, " | "))
	return out, nil
}

// joinMB formats xs as "a/b/c" with one decimal.
func joinMB(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, "/")
}

// heapAttempts is how many times liveHeapMB tries for a reading no automatic collection came into.
const heapAttempts = 10

// liveHeapMB scrapes metricsURL, then forces two garbage collections through the process's
// /debug/pprof/heap?gc=1&debug=1 (next to metricsURL), and returns the scrape's values and the live heap in MB:
// the HeapAlloc of the runtime.MemStats that the second text profile ends with, read right after its collection
// (the bench runs the processes it measures with heap profiling off, heapProfileOff, so the profile written
// between the collection and that read is empty). Two collections, because what a sync.Pool holds (the gzip
// writer of a compressed /metrics scrape alone is ~0.8 MB; metricsClient asks for none) survives one as the
// pool's victims. The reading is kept only when the runtime started no collection of its own between the first
// profile's MemStats and the second's (NumGC - NumForcedGC): before, the live heap was go_gc_heap_live_bytes
// scraped after two gzipped protobuf profiles, and writing a profile with heap profiling on allocated enough to
// start a collection halfway, which counted the half-written profile as live (an idle replica with 10.0 MB live
// read 11.9 MB, its automatic collections up by one). It tries heapAttempts times, then returns an error; and an
// error when a request fails or the profile has no MemStats.
func liveHeapMB(ctx context.Context, client *http.Client, metricsURL string) (map[string]float64, float64, error) {
	v, err := scrapeValues(ctx, client, metricsURL)
	if err != nil {
		return nil, 0, err
	}
	profile := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/heap?gc=1&debug=1"
	for range heapAttempts {
		var stats [2]memStats
		for i := range stats {
			body, err := get(ctx, client, profile)
			if err != nil {
				return nil, 0, err
			}
			if stats[i], err = parseMemStats(body); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", profile, err)
			}
		}
		if stats[1].automaticGCs() == stats[0].automaticGCs() {
			return v, float64(stats[1].heapAlloc) / (1 << 20), nil
		}
		logf("%s: the runtime collected on its own during the live heap reading; reading again", profile)
	}
	return nil, 0, fmt.Errorf("%s: the runtime collected on its own during each of %d readings of the live heap", profile, heapAttempts)
}

// memStats are the runtime.MemStats fields liveHeapMB reads from a text heap profile.
type memStats struct {
	heapAlloc, numGC, numForcedGC uint64
}

// automaticGCs is the number of collections the runtime started on its own.
func (m memStats) automaticGCs() uint64 { return m.numGC - m.numForcedGC }

// parseMemStats reads HeapAlloc, NumGC and NumForcedGC from the "# runtime.MemStats" lines that end Go's text heap
// profile (/debug/pprof/heap?debug=1); the error names the first that is missing or not a number.
func parseMemStats(profile []byte) (memStats, error) {
	var m memStats
	want := map[string]*uint64{"HeapAlloc": &m.heapAlloc, "NumGC": &m.numGC, "NumForcedGC": &m.numForcedGC}
	for line := range strings.Lines(string(profile)) {
		field, commented := strings.CutPrefix(strings.TrimSpace(line), "# ")
		name, value, assigned := strings.Cut(field, " = ")
		dst := want[name]
		if !commented || !assigned || dst == nil {
			continue
		}
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return memStats{}, fmt.Errorf("the heap profile's MemStats %s is %q, not a number", name, value)
		}
		*dst = n
		delete(want, name)
	}
	for _, name := range []string{"HeapAlloc", "NumGC", "NumForcedGC"} {
		if _, missing := want[name]; missing {
			return memStats{}, fmt.Errorf("the heap profile has no MemStats %s (not a text heap profile?)", name)
		}
	}
	return m, nil
}

// readCache fills the cache and ownership figures from a sharded replica's or the floor's metrics v.
func (r *replicaResult) readCache(v map[string]float64) {
	if _, ok := v["kubedeploy_bench_floor_cached_pods"]; ok {
		r.CachedPods, r.CachedNamespaces = int(v["kubedeploy_bench_floor_cached_pods"]), int(v["kubedeploy_bench_floor_cached_namespaces"])
		return
	}
	if _, ok := v["kubedeploy_shard_cached_pods"]; !ok {
		return
	}
	r.Sharded = true
	r.CachedPods, r.CachedNamespaces = int(v["kubedeploy_shard_cached_pods"]), int(v["kubedeploy_shard_cached_namespaces"])
	r.OwnedPods, r.OwnedBuckets = int(v["kubedeploy_shard_owned_pods"]), int(v["kubedeploy_shard_owned_buckets"])
	r.ServerSide = v["kubedeploy_shard_server_side_filtering"] == 1
}

// clusterPods counts the pods of the cluster.
func clusterPods(ctx context.Context, client kubernetes.Interface) (int, error) {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// getOK returns nil if GET url answers 200.
func getOK(ctx context.Context, client *http.Client, url string) error {
	_, err := get(ctx, client, url)
	return err
}

// scrapeValues reads the metrics at url and returns, per family, its series' values added up (gauges, counters
// and untyped).
func scrapeValues(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	body, err := get(ctx, client, url)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			out[name] += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return out, nil
}

// watchedKinds are the resources whose watch events scrapeWatchEvents counts, by the names the API server's
// apiserver_watch_events_total labels them with (kind or resource, by version).
var watchedKinds = map[string]bool{"Pod": true, "ReplicaSet": true, "Deployment": true, "pods": true, "replicasets": true, "deployments": true}

// apiWatches are the API server's watch figures for pods, ReplicaSets and Deployments at one moment.
type apiWatches struct {
	// sent is apiserver_watch_events_total: the events it sent to every watcher of the cluster; filtered is
	// apiserver_watch_filtered_events_total: those its watch cache dropped for a watcher's shard selector.
	sent, filtered float64
	// sharded is apiserver_watch_shards_total: the sharded watches open.
	sharded float64
}

// scrapeWatchEvents reads the API server's apiWatches.
func scrapeWatchEvents(ctx context.Context, client kubernetes.Interface) (apiWatches, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiWatches{}, fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return apiWatches{}, fmt.Errorf("parsing kube-apiserver /metrics: %w", err)
	}
	sum := func(family string) float64 {
		n := 0.0
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "kind" || l.GetName() == "resource") && watchedKinds[l.GetValue()] {
					n += m.GetCounter().GetValue() + m.GetGauge().GetValue()
					break
				}
			}
		}
		return n
	}
	return apiWatches{sent: sum("apiserver_watch_events_total"), filtered: sum("apiserver_watch_filtered_events_total"),
		sharded: sum("apiserver_watch_shards_total")}, nil
}

// readChars returns rchar of /proc/<pid>/io: the bytes the process has read through read(2) and the like,
// sockets included, so mostly what the API server sent it.
func readChars(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no rchar in /proc io")
}
