package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
)

// replicaResult is what one process of a shards-mode side cost.
type replicaResult struct {
	Side    string
	Replica int
	// IdleRSSMB and IdleHeapMB are the process's RSS and live heap settled after it was ready on the cluster
	// before the workload existed (its idle baseline); RSSMB and HeapMB the same with the workload, before the
	// rollout. The live heap is what the second of two forced collections marked live (liveHeapMB).
	IdleRSSMB, IdleHeapMB, RSSMB, HeapMB float64
	// RolloutCPUSeconds is the CPU time (user + system) it used during the rollout of every Deployment; ReadMB
	// the bytes it read meanwhile (rchar: sockets included, so mostly the API server's responses and watch
	// events); Events, for the floor only, the informer notifications it received meanwhile.
	RolloutCPUSeconds, ReadMB, Events float64
	// ReplicaSetSyncs and DeploymentSyncs are the syncs its controllers finished during the rollout (the count of
	// client-go's workqueue_work_duration_seconds for the "replicaset" and "deployment" queues, which
	// kube-controller-manager's queues are named too); 0 for the floor, which runs none.
	ReplicaSetSyncs, DeploymentSyncs float64
	// CachedPods and CachedNamespaces are the pods in its cache and their namespaces (a sharded replica's
	// kubedeploy_shard_cached_*, the floor's own count; for the unsharded replica, every pod of the cluster);
	// OwnedPods and OwnedBuckets are a sharded replica's kubedeploy_shard_owned_*.
	CachedPods, CachedNamespaces, OwnedPods, OwnedBuckets int
	// Sharded is set for a sharded replica; ServerSide when the API server filters its lists and watches.
	Sharded, ServerSide bool
}

// heapAboveIdle is HeapMB - IdleHeapMB.
func (r replicaResult) heapAboveIdle() float64 { return r.HeapMB - r.IdleHeapMB }

// rssAboveIdle is RSSMB - IdleRSSMB.
func (r replicaResult) rssAboveIdle() float64 { return r.RSSMB - r.IdleRSSMB }

// sideResult is one side of the shards mode in one repetition.
type sideResult struct {
	Side     string
	Run      int
	Replicas []replicaResult
	// RolloutSeconds is the wall time from the first image change to every Deployment complete.
	RolloutSeconds float64
	// ClusterCPUSeconds is the `kubedeploy up` process's CPU time during the rollout: the API server with etcd,
	// the scheduler, KWOK and the generic controllers, all in that one process.
	ClusterCPUSeconds float64
	// WatchEvents is the API server's apiserver_watch_events_total for pods, ReplicaSets and Deployments during
	// the rollout: what it sent to every watcher (the bench's own, the scheduler's, KWOK's and the garbage
	// collector's too).
	WatchEvents float64
	// FilteredWatchEvents is the API server's apiserver_watch_filtered_events_total for the same resources during
	// the rollout: the events its watch cache did not send to a watcher because of the watcher's shard selector;
	// ShardedWatches its apiserver_watch_shards_total at the rollout's end, meant to be the sharded watches open
	// but it went below zero in the bench's runs on v1.36.3 (-96 to -267), so it is printed, not trusted.
	FilteredWatchEvents, ShardedWatches float64
	// Writes and Conflicts are the API server's apiserver_request_total during the rollout for writes to
	// Deployments, ReplicaSets and pods (not pods/binding or pods/status), and their 409 responses: every
	// controller's, plus the bench's own image change of each Deployment.
	Writes, Conflicts int
	// WritesBy is Writes by "VERB resource[/subresource]".
	WritesBy map[string]int
	// Pods is the workload's pods.
	Pods int
}

// attachIdle copies each replica's idle baseline from idle (same order).
func (r *sideResult) attachIdle(idle []replicaResult) {
	for i := range r.Replicas {
		if i < len(idle) {
			r.Replicas[i].IdleRSSMB, r.Replicas[i].IdleHeapMB = idle[i].IdleRSSMB, idle[i].IdleHeapMB
		}
	}
}

// balance is the biggest replica's pods ÷ the mean over the side's replicas (SH-5's figure, 1 for one replica);
// NaN when they hold none. It counts the pods each replica caches, which are those it owns: the ring's own
// counts (OwnedPods) are refreshed by the owners now and then, so right after a rollout they still hold its
// surge.
func (r sideResult) balance() float64 {
	most, total := 0, 0
	for _, x := range r.Replicas {
		most, total = max(most, x.CachedPods), total+x.CachedPods
	}
	if total == 0 {
		return math.NaN()
	}
	return float64(most) / (float64(total) / float64(len(r.Replicas)))
}

// cachedPods is the pods the side's replicas cache between them.
func (r sideResult) cachedPods() int {
	n := 0
	for _, x := range r.Replicas {
		n += x.CachedPods
	}
	return n
}

// writesBy formats writes by kind, most first ("PUT replicasets 1200, POST pods 3000, …").
func writesBy(by map[string]int) string {
	kinds := slices.Collect(maps.Keys(by))
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Or(by[b]-by[a], strings.Compare(a, b)) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, by[k])
	}
	return strings.Join(parts, ", ")
}

// logSide prints a progress line with a side's main figures.
func logSide(r sideResult) {
	logf("run %d %-10s rollout %6.1fs  cluster %6.1f CPU-s  writes %d (409s %d)  watch events %.0f (filtered %.0f, sharded watches %.0f)  CPU-s %s  heap above idle %s MB  cached pods %s",
		r.Run, r.Side, r.RolloutSeconds, r.ClusterCPUSeconds, r.Writes, r.Conflicts, r.WatchEvents, r.FilteredWatchEvents, r.ShardedWatches,
		joinFigures(r.Replicas, func(x replicaResult) float64 { return x.RolloutCPUSeconds }),
		joinFigures(r.Replicas, replicaResult.heapAboveIdle),
		joinFigures(r.Replicas, func(x replicaResult) float64 { return float64(x.CachedPods) }))
}

// joinFigures formats f of each replica, "a/b/c", with one decimal.
func joinFigures(rs []replicaResult, f func(replicaResult) float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.1f", f(r)))
	}
	return strings.Join(parts, "/")
}

// ratioRow is one of issue 35's Done-when ratios: a sharded side's figure (for per-replica figures, the worst
// replica's) ÷ the unsharded side's, or the balance, with the bound the issue wants.
type ratioRow struct {
	Side, Name  string
	Value, Want float64
}

// met reports whether the ratio is within its bound (NaN is not).
func (r ratioRow) met() bool { return r.Value <= r.Want }

// shardRatios returns, for each sharded side of one repetition's results, the Done-when ratios against the
// unsharded side: heap above idle (≤ 0.4) and CPU during the rollout (≤ 0.45) of its worst replica, the rollout's
// time (≤ 1.1), the cluster's CPU (≤ 1.15), and the balance (≤ 1.25). Nothing when there is no unsharded side.
func shardRatios(results []sideResult) []ratioRow {
	var base *sideResult
	for i := range results {
		if results[i].Side == shardSides[0].name && len(results[i].Replicas) == 1 {
			base = &results[i]
		}
	}
	if base == nil {
		return nil
	}
	one := base.Replicas[0]
	var out []ratioRow
	for _, r := range results {
		if len(r.Replicas) == 0 || !r.Replicas[0].Sharded {
			continue
		}
		out = append(out,
			ratioRow{r.Side, "heap above idle ÷ unsharded's (worst replica)", worst(r.Replicas, replicaResult.heapAboveIdle) / one.heapAboveIdle(), 0.4},
			ratioRow{r.Side, "CPU during rollout ÷ unsharded's (worst replica)", worst(r.Replicas, func(x replicaResult) float64 { return x.RolloutCPUSeconds }) / one.RolloutCPUSeconds, 0.45},
			ratioRow{r.Side, "rollout time ÷ unsharded's", r.RolloutSeconds / base.RolloutSeconds, 1.1},
			ratioRow{r.Side, "cluster (API server) CPU ÷ unsharded's", r.ClusterCPUSeconds / base.ClusterCPUSeconds, 1.15},
			ratioRow{r.Side, "balance: biggest replica's pods ÷ mean", r.balance(), 1.25})
	}
	return out
}

// worst returns the largest f over rs, NaN for none.
func worst(rs []replicaResult, f func(replicaResult) float64) float64 {
	out := math.NaN()
	for _, r := range rs {
		if v := f(r); math.IsNaN(out) || v > out {
			out = v
		}
	}
	return out
}

// medianRatios returns rows with, per side and name in their first order, the median value over repetitions.
func medianRatios(rows []ratioRow) []ratioRow {
	var out []ratioRow
	values := map[[2]string][]float64{}
	for _, r := range rows {
		k := [2]string{r.Side, r.Name}
		if _, seen := values[k]; !seen {
			out = append(out, r)
		}
		values[k] = append(values[k], r.Value)
	}
	for i := range out {
		out[i].Value = median(values[[2]string{out[i].Side, out[i].Name}])
	}
	return out
}

// shardRow is one row of a side's table: a figure of each replica.
type shardRow struct {
	name   string
	format string
	value  func(r replicaResult, side sideResult) float64
}

// shardRows are the rows of each side's table, in order.
var shardRows = []shardRow{
	{"idle RSS (MB)", "%.0f", func(r replicaResult, _ sideResult) float64 { return r.IdleRSSMB }},
	{"settled RSS (MB)", "%.0f", func(r replicaResult, _ sideResult) float64 { return r.RSSMB }},
	{"RSS above idle (MB)", "%.0f", func(r replicaResult, _ sideResult) float64 { return r.rssAboveIdle() }},
	{"idle heap (MB)", "%.1f", func(r replicaResult, _ sideResult) float64 { return r.IdleHeapMB }},
	{"settled heap (MB)", "%.1f", func(r replicaResult, _ sideResult) float64 { return r.HeapMB }},
	{"heap above idle (MB)", "%.1f", func(r replicaResult, _ sideResult) float64 { return r.heapAboveIdle() }},
	{"CPU-s during rollout", "%.1f", func(r replicaResult, _ sideResult) float64 { return r.RolloutCPUSeconds }},
	{"MB read during rollout (rchar)", "%.0f", func(r replicaResult, _ sideResult) float64 { return r.ReadMB }},
	{"informer notifications during rollout", "%.0f", func(r replicaResult, _ sideResult) float64 {
		if r.Sharded || r.Side != "floor" {
			return math.NaN()
		}
		return r.Events
	}},
	{"ReplicaSet syncs during rollout", "%.0f", func(r replicaResult, _ sideResult) float64 { return unlessFloor(r, r.ReplicaSetSyncs) }},
	{"Deployment syncs during rollout", "%.0f", func(r replicaResult, _ sideResult) float64 { return unlessFloor(r, r.DeploymentSyncs) }},
	{"cached pods", "%.0f", func(r replicaResult, _ sideResult) float64 { return float64(r.CachedPods) }},
	{"cached namespaces", "%.0f", func(r replicaResult, _ sideResult) float64 { return nanIfZero(r.CachedNamespaces) }},
	{"owned buckets", "%.0f", func(r replicaResult, _ sideResult) float64 { return nanIfZero(r.OwnedBuckets) }},
	{"owned pods (the ring's count)", "%.0f", func(r replicaResult, _ sideResult) float64 { return nanIfZero(r.OwnedPods) }},
	{"pods share (cached ÷ the side's)", "%.3f", func(r replicaResult, s sideResult) float64 {
		return float64(r.CachedPods) / float64(s.cachedPods())
	}},
}

// unlessFloor is v, or NaN (printed "–") for the floor's replica, which runs no controller.
func unlessFloor(r replicaResult, v float64) float64 {
	if !r.Sharded && r.Side == "floor" {
		return math.NaN()
	}
	return v
}

// nanIfZero is n, or NaN (printed "–") for 0.
func nanIfZero(n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(n)
}

// printSide writes one side's table (Markdown): a column per replica, then the side's figures.
func printSide(w io.Writer, r sideResult) {
	head, rule := "| "+r.Side+" |", "|---|"
	for i := range r.Replicas {
		head, rule = head+fmt.Sprintf(" replica %d |", i), rule+"---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, row := range shardRows {
		line := "| " + row.name + " |"
		for _, x := range r.Replicas {
			line += " " + num(row.format, row.value(x, r)) + " |"
		}
		fmt.Fprintln(w, line)
	}
	filtering := "–"
	if len(r.Replicas) > 0 && r.Replicas[0].Sharded {
		filtering = map[bool]string{true: "server-side", false: "client-side only"}[r.Replicas[0].ServerSide]
	}
	fmt.Fprintf(w, "\nrollout of every Deployment: %.1f s; cluster (`up`) CPU-s: %.1f; writes to Deployments, ReplicaSets and pods: %d (%s; 409 Conflict: %d); API server watch events (pods, ReplicaSets, Deployments, all watchers): %.0f sent, %.0f filtered out by shard selectors; apiserver_watch_shards_total %.0f (meant as the sharded watches open; below zero on v1.36.3); balance (biggest ÷ mean pods): %s; filtering: %s\n\n",
		r.RolloutSeconds, r.ClusterCPUSeconds, r.Writes, writesBy(r.WritesBy), r.Conflicts, r.WatchEvents, r.FilteredWatchEvents, r.ShardedWatches, num("%.3f", r.balance()), filtering)
}

// printRatios writes the ratio table (Markdown).
func printRatios(w io.Writer, rows []ratioRow) {
	fmt.Fprintln(w, "| side | ratio | value | issue 35 wants | within |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | ≤ %.2f | %s |\n", r.Side, r.Name, num("%.2f", r.Value), r.Want,
			map[bool]string{true: "yes", false: "no"}[r.met()])
	}
	fmt.Fprintln(w)
}

// printFloor writes each side's CPU during the rollout beside the floor's (the informers alone): per replica of
// the unsharded and sharded sides, its CPU-seconds, the floor's, and the ratio.
func printFloor(w io.Writer, results []sideResult) {
	var floorCPU float64 = math.NaN()
	for _, r := range results {
		if r.Side == "floor" && len(r.Replicas) == 1 {
			floorCPU = r.Replicas[0].RolloutCPUSeconds
		}
	}
	if math.IsNaN(floorCPU) {
		return
	}
	fmt.Fprintln(w, "| side | replica | CPU-s during rollout | floor (informers only, every namespace) | ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range results {
		if r.Side == "floor" {
			continue
		}
		for _, x := range r.Replicas {
			fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %s |\n", r.Side, x.Replica, x.RolloutCPUSeconds, floorCPU, num("%.2f", x.RolloutCPUSeconds/floorCPU))
		}
	}
	fmt.Fprintln(w)
}

// printShardReport prints, per repetition, each side's table, the floor comparison and the ratios, then (over
// several repetitions) the median ratios; with -json it writes the results to that file.
func printShardReport(o options, wl shardWorkload, results []sideResult) error {
	w := os.Stdout
	fmt.Fprintf(w, "\nkubedeploy bench: shards (%d namespaces ns-001…, one Deployment each, %d pods), %d nodes, %d run(s), %s\n\n",
		len(wl), wl.pods(), o.nodeCount(), o.runs, machine())
	var all []ratioRow
	for run := range o.runs {
		var these []sideResult
		for _, r := range results {
			if r.Run == run {
				these = append(these, r)
			}
		}
		fmt.Fprintf(w, "Run %d:\n\n", run)
		for _, r := range these {
			printSide(w, r)
		}
		printFloor(w, these)
		rows := shardRatios(these)
		printRatios(w, rows)
		all = append(all, rows...)
	}
	if o.runs > 1 {
		fmt.Fprintf(w, "Medians over %d runs:\n\n", o.runs)
		printRatios(w, medianRatios(all))
	}
	if o.jsonOut == "" {
		return nil
	}
	b, err := json.MarshalIndent(struct {
		Mode                    string
		Pods, Namespaces, Nodes int
		Machine                 string
		Results                 []sideResult
	}{o.mode, wl.pods(), len(wl), o.nodeCount(), machine(), results}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.jsonOut, b, 0o644)
}
