package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	sideOurs     = "kubedeploy"
	sideUpstream = "upstream"
	// sideObserve is `kubedeploy-controllers observe` (issue 25) following the rollouts that upstream's
	// controllers, run beside it unmeasured, perform: what observe mode costs on a managed cluster.
	sideObserve = "observe"

	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux architecture
	// Go supports.
	clockTicks = 100
	// rssEvery is how often a controller's VmRSS is sampled.
	rssEvery = 250 * time.Millisecond
	// settleFor is how long after a phase converged the bench waits before it reads the settled RSS.
	settleFor = 5 * time.Second
)

// controllerArgs returns the command line of side's controllers at rate limit q against kubeconfig (for
// sideObserve, observe mode serving plain HTTP on port): only the
// Deployment and ReplicaSet controllers, 5 workers each (both sides' default), no leader election, /metrics and
// /debug/pprof/ (both sides serve it by default) on 127.0.0.1:port (upstream lets anyone read them; kubedeploy
// authorizes the bench's admin certificate); kubedeploy's end with bins.oursArgs (-kubedeploy-args).
func controllerArgs(bins binaries, side, kubeconfig string, q rateLimit, port int) (string, []string) {
	if side == sideObserve {
		return bins.controllers, append([]string{"observe", "--kubeconfig=" + kubeconfig, "--bind-address=127.0.0.1",
			fmt.Sprintf("--port=%d", port), fmt.Sprintf("--kube-api-qps=%g", q.QPS), fmt.Sprintf("--kube-api-burst=%d", q.Burst)}, bins.oursArgs...)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		fmt.Sprintf("--kube-api-qps=%g", q.QPS),
		fmt.Sprintf("--kube-api-burst=%d", q.Burst),
		"--concurrent-deployment-syncs=5",
		"--concurrent-replicaset-syncs=5",
	}
	if side == sideUpstream {
		return bins.upstream, append(args, "--controllers=deployment-controller,replicaset-controller",
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*")
	}
	return bins.controllers, append(append(args, "--controllers=deployment,replicaset"), bins.oursArgs...)
}

// process is one running controllers child, with its RSS sampled in the background.
type process struct {
	cmd    *exec.Cmd
	exited chan error
	log    string
	port   int // of /metrics
	// plain is set for a process serving plain HTTP: observe mode and the floor.
	plain bool
	// noPprof is set for a process without /debug/pprof (observe mode).
	noPprof bool
	// profileDir, if set, is where profile writes a CPU profile of each phase's first profileFor.
	profileDir string

	mu      sync.Mutex
	peakRSS int // KiB, since the last resetPeak
	stopRSS chan struct{}
}

// startProcess starts name with args and the bench's environment plus env (KEY=value each), its output to
// logPath, and begins sampling its RSS.
func startProcess(name string, args []string, logPath string, env ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = diesWithBench()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(name), err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1), log: logPath, stopRSS: make(chan struct{})}
	go func() { p.exited <- cmd.Wait() }()
	go p.sampleRSS()
	return p, nil
}

// sampleRSS records the largest VmRSS seen every rssEvery until stop.
func (p *process) sampleRSS() {
	tick := time.NewTicker(rssEvery)
	defer tick.Stop()
	for {
		if kb, err := readRSS(p.cmd.Process.Pid); err == nil {
			p.mu.Lock()
			p.peakRSS = max(p.peakRSS, kb)
			p.mu.Unlock()
		}
		select {
		case <-p.stopRSS:
			return
		case <-tick.C:
		}
	}
}

// resetPeak returns the peak RSS since the last reset, in KiB, and starts a new one. It reads VmRSS once more
// itself, so a phase shorter than rssEvery still has a reading.
func (p *process) resetPeak() int {
	now, _ := readRSS(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	peak := max(p.peakRSS, now)
	p.peakRSS = now
	return peak
}

// settledRSS waits settleFor and returns the process's VmRSS then, in KiB.
func (p *process) settledRSS(ctx context.Context) (int, error) {
	if err := sleep(ctx, settleFor); err != nil {
		return 0, err
	}
	if err := p.alive(); err != nil {
		return 0, err
	}
	return readRSS(p.cmd.Process.Pid)
}

// sleep waits d, or returns ctx's error if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// cpu returns the CPU time the process has used so far (user + system).
func (p *process) cpu() (time.Duration, error) { return cpuOf(p.cmd.Process.Pid) }

// cpuOf returns the CPU time (user + system) process pid has used so far.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPU(string(b))
}

// parseCPU returns utime+stime from the text of /proc/<pid>/stat. The command name (field 2) may hold spaces
// and parentheses, so fields are counted after its last ')'.
func parseCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// readRSS returns VmRSS of pid in KiB.
func readRSS(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			return strconv.Atoi(fields[1])
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// diesWithBench makes a child get SIGTERM when the thread that started it exits (Linux's parent-death signal),
// so a bench killed outright (SIGKILL, SIGQUIT) leaves no cluster or controllers behind. Go ends a thread only
// when a goroutine locked to it exits, which the bench never does, so in effect that is when the bench exits.
func diesWithBench() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// alive returns an error if the process has exited.
func (p *process) alive() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("controllers exited (%v); see %s", err, p.log)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to a minute, then kills.
func (p *process) stop() {
	close(p.stopRSS)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// metricsURL is where p serves /metrics.
func (p *process) metricsURL() string {
	if p.plain {
		return fmt.Sprintf("http://127.0.0.1:%d/metrics", p.port)
	}
	return fmt.Sprintf("https://127.0.0.1:%d/metrics", p.port)
}
