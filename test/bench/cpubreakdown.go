package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuBucket is one part of a CPU profile's breakdown (-profile, issue 48): a sample belongs to the first bucket,
// in cpuBuckets' order, one of whose patterns is part of the name of a function anywhere on its stack.
type cpuBucket struct {
	name     string
	patterns []string
}

// cpuBuckets are the breakdown's buckets, in the order a sample is matched against them; a sample none matches
// is "other". The order decides where shared code goes: an allocation's GC assist is GC, not the decode that
// allocated; an API write's HTTP/2 and TLS are HTTP, not the sync that wrote; the events' own writes are HTTP.
var cpuBuckets = []cpuBucket{
	{"GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge",
		"runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination", "runtime.(*mheap).reclaim"}},
	{"decode", []string{").Unmarshal", "pkg/runtime/serializer/", "client-go/rest/watch.(*Decoder)", "encoding/json.",
		"sigs.k8s.io/json.", "sigs.k8s.io/structured-merge-diff/"}},
	{"HTTP/TLS", []string{"golang.org/x/net/http2.", "net/http.", "crypto/", "net.(*conn)", "internal/poll."}},
	{"events", []string{"k8s.io/client-go/tools/record.", "k8s.io/client-go/tools/events.", "k8s.io/apimachinery/pkg/watch.(*Broadcaster)"}},
	{"informer", []string{"k8s.io/client-go/tools/cache.", "github.com/kubedeploy/kubedeploy/internal/informerunion.",
		"github.com/kubedeploy/kubedeploy/internal/controller/podcache.", "k8s.io/apimachinery/pkg/watch."}},
	// Upstream's side (kube-controller-manager, in the single and many modes) is matched by its controllers' type
	// names, not by the import paths of upstream packages (which only internal/controlplane may name).
	{"sync", []string{"github.com/kubedeploy/kubedeploy/internal/controller/", "(*DeploymentController).",
		"(*ReplicaSetController).", "(*ControllerExpectations).", "(*RealPodControl).", "k8s.io/client-go/util/workqueue."}},
	{"scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m",
		"runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.usleep", "runtime.netpoll"}},
}

// breakdown is a CPU profile's samples summed by bucket (cpuBuckets, then "other").
type breakdown struct {
	total    time.Duration
	byBucket map[string]time.Duration
}

// share is bucket's part of the total, 0..1 (0 for an empty profile).
func (b breakdown) share(bucket string) float64 {
	if b.total == 0 {
		return 0
	}
	return float64(b.byBucket[bucket]) / float64(b.total)
}

// cpuBreakdown reads the CPU profile r (pprof's format, as /debug/pprof/profile serves it) and sums its samples'
// CPU time by bucket. The error is the profile's: unreadable, or with no "cpu" sample type.
func cpuBreakdown(r io.Reader) (breakdown, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return breakdown{}, err
	}
	value := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if value < 0 {
		return breakdown{}, fmt.Errorf("not a CPU profile: no cpu sample type")
	}
	unit := time.Nanosecond
	if p.SampleType[value].Unit == "microseconds" {
		unit = time.Microsecond
	}
	b := breakdown{byBucket: map[string]time.Duration{}}
	for _, s := range p.Sample {
		d := time.Duration(s.Value[value]) * unit
		b.total += d
		b.byBucket[bucketOf(s)] += d
	}
	return b, nil
}

// bucketOf is the name of the first of cpuBuckets that s's stack matches, "other" if none.
func bucketOf(s *profile.Sample) string {
	for _, bucket := range cpuBuckets {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, pattern := range bucket.patterns {
					if strings.Contains(line.Function.Name, pattern) {
						return bucket.name
					}
				}
			}
		}
	}
	return "other"
}

// printBreakdowns writes to w a table of the CPU breakdown of every profile -profile wrote under work
// (<name>-pprof/<phase>.pprof), one row each, in path order; a profile that cannot be read is a row saying why.
// The error is w's.
func printBreakdowns(w io.Writer, work string) error {
	paths, err := filepath.Glob(filepath.Join(work, "*-pprof", "*.pprof"))
	if err != nil || len(paths) == 0 {
		_, werr := fmt.Fprintf(w, "\nNo CPU profile was written under %s.\n", work)
		return werr
	}
	names := []string{}
	for _, bucket := range cpuBuckets {
		names = append(names, bucket.name)
	}
	names = append(names, "other")
	var out strings.Builder
	fmt.Fprintf(&out, "\nCPU profiles by bucket (share of each profile's samples; test/bench/cpubreakdown.go says what each bucket holds)\n\n")
	fmt.Fprintf(&out, "| profile | CPU-s sampled | %s |\n|---|---|%s\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, path := range paths {
		rel, _ := filepath.Rel(work, path)
		b, err := readBreakdown(path)
		if err != nil {
			fmt.Fprintf(&out, "| %s | unreadable: %v |%s\n", rel, err, strings.Repeat(" |", len(names)))
			continue
		}
		fmt.Fprintf(&out, "| %s | %.2f |", rel, b.total.Seconds())
		for _, name := range names {
			fmt.Fprintf(&out, " %.1f%% |", 100*b.share(name))
		}
		out.WriteString("\n")
	}
	_, err = io.WriteString(w, out.String())
	return err
}

// readBreakdown is cpuBreakdown of the file at path.
func readBreakdown(path string) (breakdown, error) {
	f, err := os.Open(path)
	if err != nil {
		return breakdown{}, err
	}
	defer f.Close()
	return cpuBreakdown(f)
}
