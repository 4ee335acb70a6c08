package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/controlplane/upstreame2e"
)

// binaries are the programs a run needs.
type binaries struct {
	kubedeploy, upstream, e2e string
}

// build compiles kubedeploy, upstream kube-controller-manager (when upstream is set) and, unless e2e names a
// prebuilt one, upstream's e2e binary into work/bin. It returns the first build error with the compiler's output.
func build(ctx context.Context, work, e2e string, upstream bool) (binaries, error) {
	bin := filepath.Join(work, "bin")
	b := binaries{kubedeploy: filepath.Join(bin, "kubedeploy"), e2e: e2e}
	steps := [][]string{{"build", "-o", b.kubedeploy, "./cmd/kubedeploy"}}
	if upstream {
		b.upstream = filepath.Join(bin, "upstreamkcm")
		steps = append(steps, []string{"build", "-o", b.upstream, "./internal/controlplane/upstreamkcm"})
	}
	if e2e == "" {
		b.e2e = filepath.Join(bin, "e2e.test")
		steps = append(steps, []string{"test", "-c", "-o", b.e2e, upstreame2e.Package})
	}
	for _, args := range steps {
		started := time.Now()
		logf("go %s", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "go", args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go %s (run from the repository root): %v\n%s", strings.Join(args, " "), err, out)
		}
		logf("  built in %s", time.Since(started).Round(time.Second))
	}
	return b, nil
}

// child is a background process whose output goes to a log file.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan error
}

// start runs path with args, its output appended to logPath, in its own process group.
func start(name, logPath, path string, args ...string) (*child, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait() }()
	return c, nil
}

// stop sends SIGINT (Ctrl-C) and waits up to a minute for the child to exit, then kills its process group.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(time.Minute):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		return fmt.Errorf("%s did not stop within a minute of SIGINT; killed", c.name)
	}
}

// upReadyLine is the last line `kubedeploy up` prints once it is ready.
const upReadyLine = "Press Ctrl-C to stop"

// startUp runs `kubedeploy up` on dir (a fresh data dir) and a free port, with its own controllers unless
// upstream is set, and waits up to 5 minutes for its ready line. It returns the running child and the admin
// kubeconfig's path.
func startUp(ctx context.Context, bins binaries, dir string, upstream bool) (*child, string, error) {
	args := []string{"up", "--data-dir", filepath.Join(dir, "cluster"), "--api-port", "0"}
	if upstream {
		args = append(args, "--controllers=")
	}
	logPath := filepath.Join(dir, "up.log")
	up, err := start("kubedeploy up", logPath, bins.kubedeploy, args...)
	if err != nil {
		return nil, "", err
	}
	deadline := time.After(5 * time.Minute)
	for {
		if b, err := os.ReadFile(logPath); err == nil && strings.Contains(string(b), upReadyLine) {
			return up, filepath.Join(dir, "cluster", "kubeconfig"), nil
		}
		select {
		case err := <-up.exited:
			return nil, "", fmt.Errorf("kubedeploy up exited before it was ready (%v); see %s", err, logPath)
		case <-deadline:
			return nil, "", errors.Join(errors.New("kubedeploy up not ready within 5 minutes"), up.stop())
		case <-ctx.Done():
			return nil, "", errors.Join(ctx.Err(), up.stop())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runSide runs the specs on a fresh cluster with side's controllers and returns their results. Its files go to
// work/<side>: up.log, upstream-kcm.log, sharded-<i>.log, e2e.log and report.json. With sharded > 0, kubedeploy's
// side runs that many sharded replicas instead of up's controllers.
func runSide(ctx context.Context, bins binaries, work, side string, timeout time.Duration, sharded int) (results []Result, err error) {
	dir := filepath.Join(work, side)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	up, kubeconfig, err := startUp(ctx, bins, dir, side == sideUpstream || sharded > 0)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, up.stop()) }()
	controllers, err := startControllers(bins, dir, kubeconfig, side, sharded)
	defer func() {
		for _, c := range controllers {
			err = errors.Join(err, c.stop())
		}
	}()
	if err != nil {
		return nil, err
	}
	report := filepath.Join(dir, "report.json")
	logPath := filepath.Join(dir, "e2e.log")
	logf("%s side: running the e2e specs (log: %s)", side, logPath)
	started := time.Now()
	if err := runE2E(ctx, bins.e2e, kubeconfig, report, logPath, timeout); err != nil {
		return nil, err
	}
	logf("%s side: e2e run took %s", side, time.Since(started).Round(time.Second))
	f, err := os.Open(report)
	if err != nil {
		return nil, fmt.Errorf("the e2e binary wrote no report (see %s): %w", logPath, err)
	}
	defer f.Close()
	return readReport(f)
}

// startControllers starts the controllers up does not run: upstream's kube-controller-manager with its
// Deployment and ReplicaSet controllers for the upstream side, or sharded `kubedeploy controllers --sharding`
// replicas; none for kubedeploy's side without sharding. It returns those it started.
func startControllers(bins binaries, dir, kubeconfig, side string, sharded int) ([]*child, error) {
	if side == sideUpstream {
		kcm, err := start("upstream kube-controller-manager", filepath.Join(dir, "upstream-kcm.log"), bins.upstream,
			"--kubeconfig="+kubeconfig, "--controllers=deployment-controller,replicaset-controller",
			"--leader-elect=false", "--secure-port=0")
		if err != nil {
			return nil, err
		}
		return []*child{kcm}, nil
	}
	var started []*child
	for i := range sharded {
		c, err := start(fmt.Sprintf("sharded replica %d", i), filepath.Join(dir, fmt.Sprintf("sharded-%d.log", i)), bins.kubedeploy,
			"controllers", "--sharding", "--kubeconfig="+kubeconfig, "--secure-port=0",
			// up's loopback rate limits, so that the sharded side runs at the rate up's own controllers do
			"--kube-api-qps=5000", "--kube-api-burst=10000")
		if err != nil {
			return started, err
		}
		started = append(started, c)
	}
	if sharded > 0 {
		logf("%s side: %d sharded replicas (logs: %s)", side, sharded, filepath.Join(dir, "sharded-*.log"))
	}
	return started, nil
}

// e2eArgs returns the e2e binary's command line: the skeleton provider, the focus and skip expressions, a JSON
// report, and a ginkgo timeout of timeout.
func e2eArgs(kubeconfig, report string, timeout time.Duration) []string {
	return []string{
		"--provider=skeleton",
		"--kubeconfig=" + kubeconfig,
		"--ginkgo.focus=" + ginkgoFocus(),
		"--ginkgo.skip=" + skipRegexp(),
		"--ginkgo.json-report=" + report,
		"--ginkgo.no-color",
		"--ginkgo.timeout=" + timeout.String(),
	}
}

// runE2E runs the e2e binary against kubeconfig, its output to logPath. A non-zero exit is not an error here (it
// means a spec failed, which the report says); no report or a run past timeout plus a minute is.
func runE2E(ctx context.Context, e2e, kubeconfig, report, logPath string, timeout time.Duration) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e, e2eArgs(kubeconfig, report, timeout)...)
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("e2e run did not end within %s: %w", timeout+time.Minute, ctx.Err())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return fmt.Errorf("run %s: %w", e2e, err)
	}
	return nil
}

// logf prints a timestamped progress line to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
