package controllerscmd

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"
)

// parsedMemoryOptions returns memoryOptions after parsing args, with the runtime's GC target and memory limit
// restored after the test, and GOGC and GOMEMLIMIT unset unless the test sets them.
func parsedMemoryOptions(t *testing.T, args ...string) *memoryOptions {
	t.Helper()
	prevGC, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) })
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(v, "") // restores the variable after the test
		if err := os.Unsetenv(v); err != nil {
			t.Fatal(err)
		}
	}
	o := &memoryOptions{}
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addMemoryFlags(f, o)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// withCgroupLimit makes the cgroup reader return limit and err for the test.
func withCgroupLimit(t *testing.T, limit uint64, err error) {
	prev := cgroupLimit
	cgroupLimit = func() (uint64, error) { return limit, err }
	t.Cleanup(func() { cgroupLimit = prev })
}

// TestGCPercentPrecedence (issue 48): --gc-percent given wins; else GOGC from the environment, left to the
// runtime; else GCPercent.
func TestGCPercentPrecedence(t *testing.T) {
	withCgroupLimit(t, 0, memlimit.ErrNoLimit)
	t.Run("default", func(t *testing.T) {
		p := parsedMemoryOptions(t).apply()
		if p.GCPercent != GCPercent || p.GCPercentFrom != "default" {
			t.Errorf("policy %+v; want %d from default", p, GCPercent)
		}
		if now := debug.SetGCPercent(100); now != GCPercent {
			t.Errorf("runtime's target %d; want %d", now, GCPercent)
		}
	})
	t.Run("GOGC", func(t *testing.T) {
		o := parsedMemoryOptions(t)
		t.Setenv("GOGC", "80")
		if p := o.apply(); p.GCPercent != 80 || p.GCPercentFrom != "GOGC" {
			t.Errorf("with GOGC=80: %+v", p)
		}
		if now := debug.SetGCPercent(100); now != 100 {
			t.Errorf("with GOGC set the target was changed to %d", now)
		}
		t.Setenv("GOGC", "off")
		if p := o.apply(); p.GCPercent != -1 {
			t.Errorf("with GOGC=off: %+v; want -1", p)
		}
	})
	t.Run("flag over GOGC", func(t *testing.T) {
		o := parsedMemoryOptions(t, "--gc-percent=150")
		t.Setenv("GOGC", "80")
		if p := o.apply(); p.GCPercent != 150 || p.GCPercentFrom != "flag" {
			t.Errorf("policy %+v; want 150 from the flag", p)
		}
		if now := debug.SetGCPercent(100); now != 150 {
			t.Errorf("runtime's target %d; want 150", now)
		}
	})
}

// TestMemoryLimit (issue 48): auto takes MemoryLimitRatio of the cgroup's limit, or none when the cgroup sets
// none or cannot be read; a quantity or none as given; GOMEMLIMIT from the environment is left alone unless the
// flag is given.
func TestMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name      string
		args      []string
		env       string
		cg        uint64
		cgErr     error
		want      int64
		wantFrom  string
		wantShown string
	}{
		{name: "auto, 512Mi cgroup", cg: 512 * mi, want: 512 * mi * 9 / 10, wantFrom: "90% of the cgroup's 512Mi"},
		{name: "auto, no cgroup limit", cgErr: memlimit.ErrNoLimit, want: math.MaxInt64, wantFrom: "none: the cgroup sets no memory limit", wantShown: "none"},
		{name: "auto, no cgroup", cgErr: errors.New("process is not in cgroup"), want: math.MaxInt64, wantFrom: "none: no cgroup memory limit to read (process is not in cgroup)"},
		{name: "quantity", args: []string{"--memory-limit=300Mi"}, cg: 512 * mi, want: 300 * mi, wantFrom: "flag", wantShown: "300Mi"},
		{name: "none", args: []string{"--memory-limit=none"}, cg: 512 * mi, want: math.MaxInt64, wantFrom: "none"},
		{name: "GOMEMLIMIT", env: "200MiB", cg: 512 * mi, want: 200 * mi, wantFrom: "GOMEMLIMIT", wantShown: "200Mi"},
		{name: "flag over GOMEMLIMIT", args: []string{"--memory-limit=100Mi"}, env: "200MiB", want: 100 * mi, wantFrom: "flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withCgroupLimit(t, tc.cg, tc.cgErr)
			o := parsedMemoryOptions(t, tc.args...)
			if tc.env != "" {
				t.Setenv("GOMEMLIMIT", tc.env)
				debug.SetMemoryLimit(200 * mi) // what the runtime read from it at start
			}
			p := o.apply()
			if p.MemoryLimit != tc.want || p.MemoryLimitSource != tc.wantFrom {
				t.Errorf("policy %+v; want limit %d from %q", p, tc.want, tc.wantFrom)
			}
			if now := debug.SetMemoryLimit(-1); now != tc.want {
				t.Errorf("runtime's memory limit %d; want %d", now, tc.want)
			}
			if tc.wantShown != "" {
				kv := p.logValues()
				if shown := kv[5]; shown != tc.wantShown {
					t.Errorf("logged memoryLimit %v; want %q (log values %v)", shown, tc.wantShown, kv)
				}
			}
		})
	}
}

// TestMemoryFlagsRefuseBadValues: each bad value is refused, naming the flag.
func TestMemoryFlagsRefuseBadValues(t *testing.T) {
	for _, args := range [][]string{{"--gc-percent=-2"}, {"--memory-limit=lots"}, {"--memory-limit=512"}, {"--memory-limit=-1Gi"}} {
		o := parsedMemoryOptions(t, args...)
		flag := strings.SplitN(args[0], "=", 2)[0]
		if err := o.check(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%v: error %v; want one naming %s", args, err, flag)
		}
	}
	for _, args := range [][]string{nil, {"--gc-percent=-1"}, {"--gc-percent=0"}, {"--memory-limit=AUTO"}, {"--memory-limit=1Gi"}} {
		if err := parsedMemoryOptions(t, args...).check(); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
