package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfile builds a CPU profile (nanoseconds) with one sample per stack, each stack's functions listed leaf
// first, worth its duration.
func cpuProfile(t *testing.T, stacks map[time.Duration][]string) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	funcs := map[string]*profile.Function{}
	for d, stack := range stacks {
		var locs []*profile.Location
		for _, name := range stack {
			f, ok := funcs[name]
			if !ok {
				f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{int64(d / (10 * time.Millisecond)), int64(d)}})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCPUBreakdown checks that each sample goes to the first bucket its stack matches (issue 48's breakdown):
// GC assist inside a decode is GC, a decode inside a watch is decode, a write's HTTP/2 inside a sync is HTTP, an
// unknown stack is other; the shares add up to the total.
func TestCPUBreakdown(t *testing.T) {
	raw := cpuProfile(t, map[time.Duration][]string{
		100 * time.Millisecond: {"runtime.scanObject", "runtime.gcDrain", "runtime.gcBgMarkWorker"},
		20 * time.Millisecond:  {"runtime.gcAssistAlloc", "runtime.mallocgc", "k8s.io/api/core/v1.(*PodSpec).Unmarshal", "k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"},
		50 * time.Millisecond:  {"k8s.io/api/core/v1.(*PodSpec).Unmarshal", "k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"},
		30 * time.Millisecond:  {"internal/runtime/syscall/linux.Syscall6", "crypto/tls.(*Conn).Write", "golang.org/x/net/http2.(*clientStream).writeRequest", "github.com/kubedeploy/kubedeploy/internal/controller/replicaset.(*Controller).createPod"},
		40 * time.Millisecond:  {"github.com/kubedeploy/kubedeploy/internal/controller/deployment.(*Controller).syncDeployment"},
		10 * time.Millisecond:  {"k8s.io/client-go/tools/cache.(*processorListener).run"},
		60 * time.Millisecond:  {"runtime.futex", "runtime.findRunnable", "runtime.schedule"},
		5 * time.Millisecond:   {"main.somethingElse"},
	})
	b, err := cpuBreakdown(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"GC": 120 * time.Millisecond, "decode": 50 * time.Millisecond, "HTTP/TLS": 30 * time.Millisecond,
		"sync": 40 * time.Millisecond, "informer": 10 * time.Millisecond, "scheduler": 60 * time.Millisecond, "other": 5 * time.Millisecond}
	for bucket, d := range want {
		if b.byBucket[bucket] != d {
			t.Errorf("%s: %v, want %v (all: %v)", bucket, b.byBucket[bucket], d, b.byBucket)
		}
	}
	if b.total != 315*time.Millisecond {
		t.Errorf("total %v, want 315ms", b.total)
	}
	if got := b.share("GC"); got < 0.38 || got > 0.39 {
		t.Errorf("GC share %.3f, want 120/315", got)
	}
}

// TestCPUBreakdownRefuses checks that a profile without CPU samples and bytes that are no profile are errors, and
// that printBreakdowns shows them as unreadable rows beside a good one.
func TestCPUBreakdownRefuses(t *testing.T) {
	heap := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}}
	var buf bytes.Buffer
	if err := heap.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := cpuBreakdown(bytes.NewReader(buf.Bytes())); err == nil || !strings.Contains(err.Error(), "not a CPU profile") {
		t.Errorf("heap profile: err %v, want not a CPU profile", err)
	}
	if _, err := cpuBreakdown(strings.NewReader("not a profile")); err == nil {
		t.Error("garbage: no error")
	}

	work := t.TempDir()
	write := func(rel string, b []byte) {
		t.Helper()
		path := filepath.Join(work, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a-0-pprof/rollout.pprof", cpuProfile(t, map[time.Duration][]string{time.Second: {"runtime.gcBgMarkWorker"}}))
	write("b-0-pprof/rollout.pprof", []byte("garbage"))
	var out strings.Builder
	if err := printBreakdowns(&out, work); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| a-0-pprof/rollout.pprof | 1.00 | 100.0% |", "| b-0-pprof/rollout.pprof | unreadable: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printBreakdowns(&out, t.TempDir()); err != nil || !strings.Contains(out.String(), "No CPU profile") {
		t.Errorf("empty work dir: %q, %v", out.String(), err)
	}
}

// TestMergeProfiles checks that the whole-rollout profile is the sum of its windows (issue 48: the shards mode's
// -profile): two windows' samples add up by stack, a missing window is skipped, and no readable window is an error.
func TestMergeProfiles(t *testing.T) {
	dir := t.TempDir()
	stack := []string{"github.com/kubedeploy/kubedeploy/internal/controller/replicaset.(*Controller).syncReplicaSet"}
	windows := []string{filepath.Join(dir, "01.pprof"), filepath.Join(dir, "02.pprof"), filepath.Join(dir, "missing.pprof")}
	for i, d := range []time.Duration{300 * time.Millisecond, 200 * time.Millisecond} {
		if err := os.WriteFile(windows[i], cpuProfile(t, map[time.Duration][]string{d: stack}), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "rollout.pprof")
	if err := mergeProfiles(windows, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	merged, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var cpu int64
	for _, s := range merged.Sample {
		cpu += s.Value[1]
	}
	if want := int64(500 * time.Millisecond); cpu != want || len(merged.Sample) != 1 {
		t.Errorf("merged profile: %d samples worth %v, want 1 worth %v", len(merged.Sample), time.Duration(cpu), time.Duration(want))
	}
	if err := mergeProfiles(windows[2:], out); err == nil || !strings.Contains(err.Error(), "none of the 1 profiles") {
		t.Errorf("merging only a missing window: err = %v, want none could be read", err)
	}
}
