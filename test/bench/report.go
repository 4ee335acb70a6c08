package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// metric is one row kind of the table: how to read it off a result and how to print it.
type metric struct {
	name   string
	value  func(r result, b float64) float64 // b is the median B in pod creates/s
	format string
}

// metrics are the table's rows for each rate limit and phase, in order.
var metrics = []metric{
	{"time (s)", func(r result, _ float64) float64 { return r.Seconds }, "%.1f"},
	{"time ÷ write bound", func(r result, b float64) float64 { return r.Seconds / (float64(r.BoundWrites) / b) }, "%.2f"},
	{"controller CPU-s", func(r result, _ float64) float64 { return r.CPUSeconds }, "%.2f"},
	{"controller peak RSS (MB)", func(r result, _ float64) float64 { return r.PeakRSSMB }, "%.0f"},
	{"controller RSS settled (MB)", func(r result, _ float64) float64 { return r.RSSMB }, "%.0f"},
	{"bytes per cached pod (settled RSS growth ÷ pods)", func(r result, _ float64) float64 { return bytesPerPod(r) }, "%.0f"},
	{"Deployment+ReplicaSet writes", func(r result, _ float64) float64 { return float64(workloadWrites(r.Writes)) }, "%.0f"},
	{"pod creates", func(r result, _ float64) float64 { return float64(r.Writes["POST pods"]) }, "%.0f"},
	{"409 Conflict", func(r result, _ float64) float64 { return float64(sum(r.Conflicts)) }, "%.0f"},
	{"422 refused", func(r result, _ float64) float64 { return float64(sum(r.Unprocessable)) }, "%.0f"},
	{"ReplicaSet scale-down steps", func(r result, _ float64) float64 { return float64(r.ScaleDowns) }, "%.0f"},
	{"syncs (both queues)", func(r result, _ float64) float64 { return float64(r.Queues.Syncs) }, "%.0f"},
	{"delayed adds (retries, AddAfter)", func(r result, _ float64) float64 { return float64(r.Queues.Retries) }, "%.0f"},
	{"sync p50 (ms)", func(r result, _ float64) float64 { return r.Queues.SyncP50 * 1000 }, "%.1f"},
	{"sync p99 (ms)", func(r result, _ float64) float64 { return r.Queues.SyncP99 * 1000 }, "%.1f"},
	{"queue wait p99 (ms)", func(r result, _ float64) float64 { return r.Queues.WaitP99 * 1000 }, "%.1f"},
	{"cluster CPU-s (`up` process)", func(r result, _ float64) float64 { return r.ClusterCPUSeconds }, "%.2f"},
}

// bytesPerPod is how much the controllers' settled RSS grew over the idle one per pod in the namespace, in bytes;
// NaN when the phase ends with no pods.
func bytesPerPod(r result) float64 {
	if r.Pods == 0 {
		return math.NaN()
	}
	return (r.RSSMB - r.IdleRSSMB) * 1024 * 1024 / float64(r.Pods)
}

// workloadWrites adds up the writes on deployments and replicasets (any subresource).
func workloadWrites(w map[string]int) int {
	n := 0
	for k, v := range w {
		if _, res, _ := strings.Cut(k, " "); strings.HasPrefix(res, "deployments") || strings.HasPrefix(res, "replicasets") {
			n += v
		}
	}
	return n
}

// report is the aggregated measurement.
type report struct {
	pods    int     // of the probe
	b       float64 // median pod creates/s
	probes  []probe
	results []result
}

func newReport(pods int, probes []probe, results []result) report {
	var rates []float64
	for _, p := range probes {
		rates = append(rates, p.rate())
	}
	return report{pods: pods, b: median(rates), probes: probes, results: results}
}

// row is one line of the table: the medians of one metric for each side, and their ratio.
type row struct {
	qps, phase, metric string
	ours, upstream     float64
	format             string
}

// ratio is kubedeploy ÷ upstream, NaN when upstream is 0 or a side was not measured.
func (r row) ratio() float64 {
	if r.upstream == 0 || math.IsNaN(r.upstream) || math.IsNaN(r.ours) {
		return math.NaN()
	}
	return r.ours / r.upstream
}

// rows returns the table's rows: every rate limit and phase measured, in the order first seen, each with every
// metric.
func (rep report) rows() []row {
	var out []row
	for _, q := range firstSeen(rep.results, func(r result) string { return r.QPS }) {
		for _, ph := range firstSeen(rep.results, func(r result) string { return r.Phase }) {
			for _, m := range metrics {
				out = append(out, row{qps: q, phase: ph, metric: m.name, format: m.format,
					ours:     rep.median(sideOurs, q, ph, m),
					upstream: rep.median(sideUpstream, q, ph, m)})
			}
		}
	}
	return out
}

// median returns the median of m over the runs of side at rate limit q in phase ph, NaN if there are none.
func (rep report) median(side, q, ph string, m metric) float64 {
	var xs []float64
	for _, r := range rep.results {
		if r.Side == side && r.QPS == q && r.Phase == ph {
			xs = append(xs, m.value(r, rep.b))
		}
	}
	return median(xs)
}

// print writes the table (Markdown) and, per rate limit and phase, each side's median writes, 409s and 422s by
// verb and resource.
func (rep report) print(w io.Writer) {
	var rates []string
	for _, p := range rep.probes {
		rates = append(rates, fmt.Sprintf("%.0f", p.rate()))
	}
	fmt.Fprintf(w, "B (raw pod creates/s, %d pods, %d clients): median %.0f of %s; write bound of N creates: %.2fs\n\n",
		rep.pods, probeWorkers, rep.b, strings.Join(rates, ", "), float64(rep.pods)/rep.b)
	fmt.Fprintln(w, "| QPS | phase | metric | kubedeploy | upstream | ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rep.rows() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.qps, r.phase, r.metric,
			num(r.format, r.ours), num(r.format, r.upstream), num("%.2f", r.ratio()))
	}
	fmt.Fprintln(w)
	rep.printObserve(w)
	fmt.Fprintln(w, "Requests by verb and resource (medians; writes include failed ones):")
	for _, q := range firstSeen(rep.results, func(r result) string { return r.QPS }) {
		for _, ph := range firstSeen(rep.results, func(r result) string { return r.Phase }) {
			for _, side := range []string{sideOurs, sideUpstream, sideObserve} {
				var ws, cs, us []map[string]int
				for _, r := range rep.results {
					if r.Side == side && r.QPS == q && r.Phase == ph {
						ws, cs, us = append(ws, r.Writes), append(cs, r.Conflicts), append(us, r.Unprocessable)
					}
				}
				if len(ws) == 0 {
					continue
				}
				fmt.Fprintf(w, "  %-7s %-10s %-10s writes: %s; 409: %s; 422: %s\n", q, ph, side,
					counts(medianCounts(ws)), counts(medianCounts(cs)), counts(medianCounts(us)))
			}
		}
	}
}

// observeMetrics are the rows of the observe table: what observe mode costs beside what the controllers cost.
var observeMetrics = []string{"controller CPU-s", "controller peak RSS (MB)", "controller RSS settled (MB)"}

// printObserve writes, when the observe side was measured, its CPU and memory beside kubedeploy's controllers'
// (issue 25: observe's settled RSS at most theirs, its CPU in the rolling phase at most half).
func (rep report) printObserve(w io.Writer) {
	if !slices.ContainsFunc(rep.results, func(r result) bool { return r.Side == sideObserve }) {
		return
	}
	fmt.Fprintln(w, "kubedeploy observe (following upstream's controllers) beside kubedeploy's controllers:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| QPS | phase | metric | observe | kubedeploy | observe ÷ kubedeploy |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, q := range firstSeen(rep.results, func(r result) string { return r.QPS }) {
		for _, ph := range firstSeen(rep.results, func(r result) string { return r.Phase }) {
			for _, m := range metrics {
				if !slices.Contains(observeMetrics, m.name) {
					continue
				}
				o, k := rep.median(sideObserve, q, ph, m), rep.median(sideOurs, q, ph, m)
				r := row{ours: o, upstream: k}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", q, ph, strings.TrimPrefix(m.name, "controller "),
					num(m.format, o), num(m.format, k), num("%.2f", r.ratio()))
			}
		}
	}
	fmt.Fprintln(w)
}

// num formats x, or "–" for NaN.
func num(format string, x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf(format, x)
}

// counts formats a count map as "k=v, …" sorted by key, "none" when empty.
func counts(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%g", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// medianCounts returns, per key, the median over ms (a missing key counts 0).
func medianCounts(ms []map[string]int) map[string]float64 {
	keys := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			keys[k] = true
		}
	}
	out := map[string]float64{}
	for k := range keys {
		var xs []float64
		for _, m := range ms {
			xs = append(xs, float64(m[k]))
		}
		out[k] = median(xs)
	}
	return out
}

// median returns the median of xs (the mean of the middle two for an even count), NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// firstSeen returns the distinct keys of results in the order they first appear.
func firstSeen(results []result, key func(result) string) []string {
	var out []string
	for _, r := range results {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
