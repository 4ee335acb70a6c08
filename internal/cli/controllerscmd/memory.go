package controllerscmd

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GCPercent is the Go garbage collector's target (GOGC) the controllers run with unless --gc-percent or the GOGC
// environment variable says otherwise. The heap grows to (1 + GCPercent/100) times what is live before the
// runtime collects, so a lower value means less memory and more frequent collections. 75 is chosen by measurement
// beside upstream (issue 48, docs/performance.md "The memory policy"): on 2026-12-01, of 25, 50 and 100, only 25 and
// 50 kept the controllers' peak RSS within 0.6 of upstream's in both the 1,000-replica and the many-Deployments
// bench; after 2026-12-02's allocation cuts, 75 did (`go run ./test/bench -replicas 1000 -runs 3 -qps lifted
// -kubedeploy-args=--gc-percent=75`: peak RSS 0.56, rolling update CPU 0.66 against 0.68 at 50; `-mode many
// -pods 10000`: peak RSS 0.56).
const GCPercent = 75

// MemoryLimitRatio is the share of the container's memory limit (the cgroup's memory.max, or memory.limit_in_bytes
// on cgroup v1) that --memory-limit=auto gives the Go runtime as its soft limit (GOMEMLIMIT): near it the runtime
// collects harder, whatever the GC target, so the controllers give memory back before the kernel kills them.
const MemoryLimitRatio = 0.9

// memoryOptions are the --gc-percent and --memory-limit flags of `controllers` and `observe`.
type memoryOptions struct {
	gcPercent   int
	memoryLimit string
	flags       *pflag.FlagSet // to tell a flag given from its default
}

// addMemoryFlags adds --gc-percent and --memory-limit to f, filling o.
func addMemoryFlags(f *pflag.FlagSet, o *memoryOptions) {
	o.flags = f
	f.IntVar(&o.gcPercent, "gc-percent", GCPercent,
		"Go garbage collector target (GOGC): the heap grows to (1 + N/100) times the live heap before a collection; -1 turns collection off (then only --memory-limit triggers it). Not given: GOGC from the environment if set, else this default")
	f.StringVar(&o.memoryLimit, "memory-limit", "auto",
		"soft memory limit of the Go runtime (GOMEMLIMIT): a quantity in bytes (400Mi, 1G), \"auto\" (90% of the container's cgroup memory limit, none without one) or \"none\". Not given: GOMEMLIMIT from the environment if set, else auto")
}

// check returns an error naming the flag when --gc-percent is below -1 or --memory-limit is not a quantity, auto or
// none.
func (o *memoryOptions) check() error {
	if o.gcPercent < -1 {
		return fmt.Errorf("--gc-percent must be -1 (off) or at least 0, got %d", o.gcPercent)
	}
	_, err := parseMemoryLimit(o.memoryLimit)
	return err
}

// parseMemoryLimit returns the bytes of a --memory-limit quantity; 0 for "auto" and -1 for "none". It returns an
// error naming the flag for anything else, or for a quantity below 1 MiB (a typo such as "512" bytes would make
// the runtime collect without end).
func parseMemoryLimit(s string) (int64, error) {
	switch strings.ToLower(s) {
	case "auto":
		return 0, nil
	case "none":
		return -1, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit must be a quantity (e.g. 400Mi), auto or none, got %q", s)
	}
	if b := q.Value(); b >= 1<<20 {
		return b, nil
	}
	return 0, fmt.Errorf("--memory-limit must be at least 1Mi, got %q", s)
}

// memoryPolicy is what the controllers' runtime runs with: the GC target (-1 for off) and the soft memory limit
// (bytes; math.MaxInt64 for none), with where each came from, for the start-up log line.
type memoryPolicy struct {
	GCPercent         int
	GCPercentFrom     string // "flag", "GOGC" or "default"
	MemoryLimit       int64
	MemoryLimitSource string // e.g. "flag", "GOMEMLIMIT", "90% of the cgroup's 512Mi", "none: no cgroup limit"
}

// cgroupLimit reads the container's memory limit in bytes; automemlimit's reader, a variable so tests can give
// one. It returns memlimit.ErrNoLimit when the cgroup sets none, another error when there is no cgroup to read.
var cgroupLimit = memlimit.FromCgroup

// apply sets the runtime's GC target and soft memory limit (flags first, then GOGC and GOMEMLIMIT from the
// environment, which the runtime has applied at start, then the defaults) and returns them. The flags are checked
// first (check), so it returns no error; a cgroup that cannot be read means no limit.
func (o *memoryOptions) apply() memoryPolicy {
	var p memoryPolicy
	switch v, env := os.LookupEnv("GOGC"); {
	case o.given("gc-percent") || !env:
		p.GCPercent, p.GCPercentFrom = o.gcPercent, "flag"
		if !o.given("gc-percent") {
			p.GCPercentFrom = "default"
		}
		debug.SetGCPercent(p.GCPercent)
	default:
		p.GCPercent, p.GCPercentFrom = gogcOf(v), "GOGC"
	}
	if _, env := os.LookupEnv("GOMEMLIMIT"); env && !o.given("memory-limit") {
		p.MemoryLimit, p.MemoryLimitSource = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
		return p
	}
	limit, _ := parseMemoryLimit(o.memoryLimit) // checked
	switch {
	case limit > 0:
		p.MemoryLimit, p.MemoryLimitSource = limit, "flag"
	case limit < 0:
		p.MemoryLimit, p.MemoryLimitSource = math.MaxInt64, "none"
	default:
		p.MemoryLimit, p.MemoryLimitSource = autoMemoryLimit()
	}
	debug.SetMemoryLimit(p.MemoryLimit)
	return p
}

// autoMemoryLimit returns MemoryLimitRatio of the cgroup's memory limit and says so, or math.MaxInt64 (no limit)
// and why.
func autoMemoryLimit() (int64, string) {
	cg, err := cgroupLimit()
	switch {
	case errors.Is(err, memlimit.ErrNoLimit) || (err == nil && cg == 0):
		return math.MaxInt64, "none: the cgroup sets no memory limit"
	case err != nil:
		return math.MaxInt64, "none: no cgroup memory limit to read (" + err.Error() + ")"
	case cg > math.MaxInt64:
		return math.MaxInt64, "none: the cgroup's limit is unbounded"
	}
	limit := int64(float64(cg) * MemoryLimitRatio)
	return limit, fmt.Sprintf("%.0f%% of the cgroup's %s", MemoryLimitRatio*100, resource.NewQuantity(int64(cg), resource.BinarySI))
}

// given reports whether the flag was set on the command line.
func (o *memoryOptions) given(name string) bool { return o.flags != nil && o.flags.Changed(name) }

// gogcOf returns the GC target the runtime took from a GOGC value: -1 for off, 100 for one it cannot parse.
func gogcOf(v string) int {
	if v == "off" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 100
	}
	return n
}

// logValues returns the policy as structured log keys and values: gcPercent, its source, memoryLimit (a quantity,
// or "none") and its source.
func (p memoryPolicy) logValues() []any {
	limit := "none"
	if p.MemoryLimit != math.MaxInt64 {
		limit = resource.NewQuantity(p.MemoryLimit, resource.BinarySI).String()
	}
	return []any{"gcPercent", p.GCPercent, "gcPercentFrom", p.GCPercentFrom, "memoryLimit", limit, "memoryLimitFrom", p.MemoryLimitSource}
}
