package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// modeIdle measures an idle `kubedeploy up` (-mode idle).
const modeIdle = "idle"

// Idle measurement windows: how long up runs before it is measured, and over how long its CPU is counted.
const (
	idleSettle = time.Minute
	idleWindow = 30 * time.Second
)

// runIdle starts `kubedeploy up` with its own controllers o.runs times, each on a fresh data dir, lets it settle
// for idleSettle, then prints its CPU-seconds over idleWindow and its RSS (VmRSS, in MB) at the end, and the
// medians.
func runIdle(ctx context.Context, bins binaries, work string, o options) error {
	var cpus, rsss []float64
	for run := range o.runs {
		dir := fmt.Sprintf("%s/idle-%d", work, run)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cl, err := startCluster(ctx, bins, dir, o.nodeCount(), true)
		if err != nil {
			return err
		}
		cpu, rss, err := idleCost(ctx, cl.cmd.Process.Pid)
		if stopErr := cl.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return err
		}
		logf("run %d: idle up: %.2f CPU-s per %s, RSS %.0f MB", run, cpu, idleWindow, rss)
		cpus, rsss = append(cpus, cpu), append(rsss, rss)
	}
	fmt.Printf("\nkubedeploy bench: idle `kubedeploy up` (its controllers, %d nodes, no workload), %d run(s), %s\n",
		o.nodeCount(), o.runs, machine())
	fmt.Printf("CPU-seconds per %s: median %.2f of %v\nRSS (MB): median %.0f of %v\n",
		idleWindow, median(cpus), cpus, median(rsss), rsss)
	return nil
}

// idleCost waits idleSettle, then returns pid's CPU-seconds over idleWindow and its VmRSS in MB at the end.
func idleCost(ctx context.Context, pid int) (cpuSeconds, rssMB float64, err error) {
	if err := sleep(ctx, idleSettle); err != nil {
		return 0, 0, err
	}
	before, err := cpuOf(pid)
	if err != nil {
		return 0, 0, err
	}
	if err := sleep(ctx, idleWindow); err != nil {
		return 0, 0, err
	}
	after, err := cpuOf(pid)
	if err != nil {
		return 0, 0, err
	}
	kb, err := readRSS(pid)
	return (after - before).Seconds(), float64(kb) / 1024, err
}
