package main

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	// A command name with a space and a ')' in it; utime 250 and stime 50 ticks.
	stat := "4242 (kube (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 999 1000 100"
	got, err := parseCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseCPU = %v, %v; want 3s", got, err)
	}
	if _, err := parseCPU("4242 (x) S 1 2"); err == nil {
		t.Fatalf("parseCPU accepted a short line")
	}
}

func TestResourceOf(t *testing.T) {
	for path, want := range map[string][2]string{
		"/api/v1/namespaces/ns/pods":                           {"pods", ""},
		"/api/v1/namespaces/ns/pods/p/binding":                 {"pods", "binding"},
		"/apis/apps/v1/namespaces/ns/deployments/bench":        {"deployments", ""},
		"/apis/apps/v1/namespaces/ns/replicasets/rs-1/status":  {"replicasets", "status"},
		"/api/v1/namespaces/ns":                                {"", ""},
		"/metrics":                                             {"", ""},
		"/apis/apps/v1/namespaces/ns/deployments/bench/scale/": {"deployments", "scale"},
	} {
		if r, s := resourceOf(path); r != want[0] || s != want[1] {
			t.Errorf("resourceOf(%q) = %q, %q; want %q, %q", path, r, s, want[0], want[1])
		}
	}
}

func TestWriteCounterCountsOnlyCountedWrites(t *testing.T) {
	var w writeCounter
	rt := w.wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) { return &http.Response{}, nil }))
	for _, r := range []struct{ method, path string }{
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/bench"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/bench"},
		{"POST", "/apis/apps/v1/namespaces/ns/deployments"},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/bench"},
		{"POST", "/api/v1/namespaces"},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding"},
	} {
		req, _ := http.NewRequest(r.method, "https://127.0.0.1"+r.path, nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	got := w.snapshot()
	if len(got) != 2 || got["PATCH deployments"] != 2 || got["POST deployments"] != 1 {
		t.Fatalf("counted %v; want PATCH deployments=2, POST deployments=1", got)
	}
}

func TestDiffRequestsSubtractsTheBenchsOwnWrites(t *testing.T) {
	k := func(code, verb, res, sub string) requestKey { return requestKey{code, verb, res, sub} }
	before := requestCounts{
		k("200", "PATCH", "deployments", ""):      3,
		k("200", "PUT", "replicasets", "status"):  10,
		k("409", "PUT", "replicasets", "status"):  1,
		k("201", "POST", "pods", ""):              5,
		k("200", "GET", "replicasets", ""):        50,
		k("422", "PATCH", "replicasets", ""):      0,
		k("200", "DELETE", "replicasets", "dumb"): 4,
	}
	after := requestCounts{
		k("200", "PATCH", "deployments", ""):      4,
		k("200", "PUT", "replicasets", "status"):  14,
		k("409", "PUT", "replicasets", "status"):  3,
		k("201", "POST", "pods", ""):              25,
		k("200", "GET", "replicasets", ""):        90,
		k("422", "PATCH", "replicasets", ""):      2,
		k("200", "DELETE", "replicasets", "dumb"): 4,
	}
	got := diffRequests(before, after, map[string]int{"PATCH deployments": 1})
	wantWrites := map[string]int{"PUT replicasets/status": 6, "POST pods": 20, "PATCH replicasets": 2}
	if len(got.Writes) != len(wantWrites) {
		t.Fatalf("writes %v; want %v", got.Writes, wantWrites)
	}
	for k, v := range wantWrites {
		if got.Writes[k] != v {
			t.Errorf("writes[%s] = %d; want %d (all %v)", k, got.Writes[k], v, got.Writes)
		}
	}
	if got.Conflicts["PUT replicasets/status"] != 2 || len(got.Conflicts) != 1 {
		t.Errorf("conflicts %v; want PUT replicasets/status=2", got.Conflicts)
	}
	if got.Unprocessable["PATCH replicasets"] != 2 || len(got.Unprocessable) != 1 {
		t.Errorf("422s %v; want PATCH replicasets=2", got.Unprocessable)
	}
}

func TestMedian(t *testing.T) {
	if !math.IsNaN(median(nil)) {
		t.Errorf("median(nil) is not NaN")
	}
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median(5,1,3) = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median(4,1,3,2) = %v", got)
	}
}

func TestReportRowsAndTable(t *testing.T) {
	mk := func(side string, run int, secs float64, rsWrites, conflicts int) result {
		return result{Side: side, QPS: "lifted", Phase: "rolling", Run: run, Seconds: secs, CPUSeconds: secs / 10,
			PeakRSSMB: 50, BoundWrites: 200,
			traffic: traffic{Writes: map[string]int{"PATCH replicasets": rsWrites, "POST pods": 100},
				Conflicts: map[string]int{"PUT replicasets/status": conflicts}, Unprocessable: map[string]int{}},
			ScaleDowns: run + 1}
	}
	results := []result{
		mk(sideOurs, 0, 8, 40, 0), mk(sideUpstream, 0, 10, 50, 20),
		mk(sideOurs, 1, 6, 30, 0), mk(sideUpstream, 1, 12, 70, 30),
		mk(sideOurs, 2, 7, 35, 1), mk(sideUpstream, 2, 11, 60, 25),
	}
	// B = 100 pods/s: the bound of 200 writes is 2s.
	rep := newReport(100, []probe{{Pods: 100, Took: time.Second}}, results)
	rows := map[string]row{}
	for _, r := range rep.rows() {
		rows[r.metric] = r
	}
	check := func(metric string, ours, upstream, ratio float64) {
		t.Helper()
		r := rows[metric]
		if r.ours != ours || r.upstream != upstream || math.Abs(r.ratio()-ratio) > 1e-9 {
			t.Errorf("%s: %v / %v ratio %v; want %v / %v ratio %v", metric, r.ours, r.upstream, r.ratio(), ours, upstream, ratio)
		}
	}
	check("time (s)", 7, 11, 7.0/11)
	check("time ÷ write bound", 3.5, 5.5, 7.0/11)
	check("Deployment+ReplicaSet writes", 35, 60, 35.0/60)
	check("pod creates", 100, 100, 1)
	check("409 Conflict", 0, 25, 0)
	check("ReplicaSet scale-down steps", 2, 2, 1)
	if !math.IsNaN(rows["422 refused"].ratio()) {
		t.Errorf("422 ratio with upstream 0 = %v; want NaN (printed –)", rows["422 refused"].ratio())
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"| lifted | rolling | time (s) | 7.0 | 11.0 | 0.64 |",
		"| lifted | rolling | 422 refused | 0 | 0 | – |",
		"median 100 of 100",
		"lifted  rolling    upstream   writes: PATCH replicasets=60, POST pods=100; 409: PUT replicasets/status=25; 422: none",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for name, o := range map[string]options{
		"single":            {mode: modeSingle, replicas: 1000, runs: 1, nodes: 3, qps: "default,lifted", sides: "kubedeploy,upstream"},
		"single, nodes set": {mode: modeSingle, replicas: 2400, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy"},
		"many, auto nodes":  {mode: modeMany, pods: 10000, runs: 1, qps: "lifted", sides: "kubedeploy,upstream"},
		"idle":              {mode: modeIdle, replicas: 1000, runs: 3, sides: "kubedeploy,upstream"},
		"controller env":    {mode: modeSingle, replicas: 1000, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy,upstream", controllerEnv: "GOMAXPROCS=1 GOMEMLIMIT=64MiB"},
	} {
		if err := o.validate(); err != nil {
			t.Errorf("%s: valid options refused: %v", name, err)
		}
	}
	for name, o := range map[string]options{
		"few replicas":         {mode: modeSingle, replicas: 5, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy"},
		"too many pods":        {mode: modeSingle, replicas: 2500, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy"},
		"many on too few":      {mode: modeMany, pods: 10000, runs: 1, nodes: 10, qps: "lifted", sides: "kubedeploy"},
		"many, too few pods":   {mode: modeMany, pods: 50, runs: 1, qps: "lifted", sides: "kubedeploy"},
		"unknown mode":         {mode: "some", replicas: 100, runs: 1, qps: "lifted", sides: "kubedeploy"},
		"unknown qps":          {mode: modeSingle, replicas: 100, runs: 1, nodes: 3, qps: "fast", sides: "kubedeploy"},
		"unknown side":         {mode: modeSingle, replicas: 100, runs: 1, nodes: 3, qps: "lifted", sides: "kcm"},
		"no repetitions":       {mode: modeSingle, replicas: 100, runs: 0, nodes: 3, qps: "lifted", sides: "kubedeploy"},
		"negative node number": {mode: modeSingle, replicas: 100, runs: 1, nodes: -1, qps: "lifted", sides: "kubedeploy"},
		"env without a value":  {mode: modeSingle, replicas: 100, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy", controllerEnv: "GOMAXPROCS"},
		"env without a key":    {mode: modeSingle, replicas: 100, runs: 1, nodes: 3, qps: "lifted", sides: "kubedeploy", controllerEnv: "=1"},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, o)
		}
	}
}

func TestFleetIsTheLoadMix(t *testing.T) {
	f := fleet(10000)
	classes := map[string]int{}
	for _, m := range f {
		class, _, _ := strings.Cut(m.name, "-")
		classes[class] += int(m.replicas)
	}
	// ⌈2500/250⌉ = 10 big, ⌈2500/30⌉ = 84 medium, 5000/5 = 1000 small.
	if len(f) != 1094 || podsOf(f) != 10020 || classes["big"] != 2500 || classes["medium"] != 2520 || classes["small"] != 5000 {
		t.Errorf("fleet(10000): %d Deployments, %d pods, by class %v; want 1094, 10020, big 2500, medium 2520, small 5000",
			len(f), podsOf(f), classes)
	}
	if small := fleet(200); podsOf(small) != 160 || small[0].name != "medium-0" {
		t.Errorf("fleet(200) = %d pods starting with %s; want 160 pods in medium and small Deployments only", podsOf(small), small[0].name)
	}
	r := rescaled(f)
	if !slices.Equal(r, rescaled(f)) {
		t.Error("rescaled is not the same draw twice")
	}
	changed := 0
	for i := range f {
		if lo, hi := f[i].replicas/2, f[i].replicas*3/2; r[i].replicas < lo || r[i].replicas > hi {
			t.Errorf("%s rescaled to %d; want within [%d, %d]", f[i].name, r[i].replicas, lo, hi)
		}
		if r[i].replicas != f[i].replicas {
			changed++
		}
	}
	if changed < len(f)/2 {
		t.Errorf("only %d of %d Deployments got a new size", changed, len(f))
	}
	if o := (options{mode: modeMany, pods: 10000}); o.nodeCount()*1000 < o.peakPods() || o.nodeCount() < 13 {
		t.Errorf("many mode, 10,000 pods: %d nodes for a peak of %d pods", o.nodeCount(), o.peakPods())
	}
}

func TestQuantileInterpolatesLikeHistogramQuantile(t *testing.T) {
	// 100 samples: 50 in (0, 0.01], 40 in (0.01, 0.1], 10 in (0.1, 1].
	h := map[float64]float64{0.01: 50, 0.1: 90, 1: 100, math.Inf(1): 100}
	for q, want := range map[float64]float64{0.5: 0.01, 0.7: 0.055, 0.95: 0.55} {
		if got := quantile(q, h); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile(%v) = %v; want %v", q, got, want)
		}
	}
	if got := quantile(0.99, map[float64]float64{1: 0, math.Inf(1): 0}); !math.IsNaN(got) {
		t.Errorf("quantile of no samples = %v; want NaN", got)
	}
	if got := quantile(0.99, map[float64]float64{1: 5, math.Inf(1): 10}); got != 1 {
		t.Errorf("quantile in the +Inf bucket = %v; want the largest finite bound 1", got)
	}
	before := queueMetrics{adds: map[string]float64{"deployment": 10}, retries: map[string]float64{},
		work: map[string]map[float64]float64{"deployment": {0.01: 5, math.Inf(1): 5}}}
	after := queueMetrics{adds: map[string]float64{"deployment": 15, "replicaset": 4}, retries: map[string]float64{"replicaset": 2},
		work: map[string]map[float64]float64{"deployment": {0.01: 5, math.Inf(1): 10}, "replicaset": {0.01: 4, math.Inf(1): 4}}}
	if s := diffQueues(before, after); s.Syncs != 9 || s.Retries != 2 || s.SyncP99 != 0.01 {
		t.Errorf("diffQueues = %+v; want 9 syncs, 2 retries, p99 0.01", s)
	}
}

// The observe table puts observe's CPU and memory beside kubedeploy's controllers', per phase, with the ratio;
// without an observe side there is none.
func TestPrintObserve(t *testing.T) {
	results := []result{
		{Side: sideOurs, QPS: "lifted", Phase: "rolling", CPUSeconds: 20, PeakRSSMB: 100, RSSMB: 90},
		{Side: sideObserve, QPS: "lifted", Phase: "rolling", CPUSeconds: 5, PeakRSSMB: 80, RSSMB: 60},
	}
	var b strings.Builder
	newReport(10, nil, results).printObserve(&b)
	for _, want := range []string{"| lifted | rolling | CPU-s | 5.00 | 20.00 | 0.25 |", "| lifted | rolling | RSS settled (MB) | 60 | 90 | 0.67 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("observe table:\n%s\nwant a row %q", b.String(), want)
		}
	}
	b.Reset()
	newReport(10, nil, results[:1]).printObserve(&b)
	if b.Len() != 0 {
		t.Errorf("no observe side: printed %q, want nothing", b.String())
	}
}
