// Package differential runs the same Deployment scenarios against two identical embedded clusters, one driven by
// kube-controller-manager's own deployment and replicaset controllers (the reference) and one by kubedeploy's,
// and asserts that users see the same thing: the same ReplicaSet sizes, conditions, reasons and events, except
// where an IM-row of the spec makes kubedeploy differ on purpose or where timing legitimately changes
// intermediate steps (each such relaxation is documented where it is made).
//
// Only one control plane can run per process, so TestMain re-executes the test binary twice as children (role
// "upstream" and role "ours", selected by the KUBEDEPLOY_DIFF_ROLE environment variable). Each child starts its
// cluster, writes its kubeconfig path to a ready file and serves until its stdin closes; the parent runs the tests
// against both through their kubeconfigs.
package differential

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/manager"
)

const (
	// roleEnv selects the child role; its data dir is in dirEnv.
	roleEnv = "KUBEDEPLOY_DIFF_ROLE"
	dirEnv  = "KUBEDEPLOY_DIFF_DIR"

	roleUpstream = "upstream"
	roleOurs     = "ours"

	// childStartTimeout bounds how long a child may take to bring its cluster up on a busy machine.
	childStartTimeout = 4 * time.Minute
)

// clusterConfig is the one configuration both clusters share, so only the controllers differ.
func clusterConfig(dir string) controlplane.Config {
	return controlplane.Config{
		DataDir:             dir,
		Nodes:               2,
		PodStartupDelay:     500 * time.Millisecond,
		PodTerminationDelay: 300 * time.Millisecond,
	}
}

// cluster is one running child cluster as the parent sees it.
type cluster struct {
	role   string
	client kubernetes.Interface
	// kubeconfig is the path of the cluster's admin kubeconfig.
	kubeconfig string
	dir        string
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	exited     chan error // receives cmd.Wait's result once
}

// upstream and ours are the two clusters, set by TestMain (nil under -short).
var upstream, ours *cluster

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(serveChild(role, os.Getenv(dirEnv)))
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runParent(m))
}

// runParent starts both children in parallel, runs the tests and stops the children. Data dirs (with the
// children's logs) are kept when anything failed.
func runParent(m *testing.M) int {
	root, err := os.MkdirTemp("", "kubedeploy-diff-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	begin := time.Now()
	type started struct {
		c   *cluster
		err error
	}
	results := make(chan started, 2)
	for _, role := range []string{roleUpstream, roleOurs} {
		go func() {
			c, err := startChild(role, filepath.Join(root, role))
			results <- started{c, err}
		}()
	}
	var errs []error
	for range 2 {
		r := <-results
		errs = append(errs, r.err)
		if r.c != nil && r.c.role == roleUpstream {
			upstream = r.c
		} else if r.c != nil {
			ours = r.c
		}
	}
	code := 0
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "starting the differential clusters: %v\n", err)
		code = 1
	} else {
		fmt.Fprintf(os.Stderr, "differential clusters ready in %s\n", time.Since(begin).Round(time.Second))
		code = runObserved(m, upstream)
	}
	for _, c := range []*cluster{upstream, ours} {
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the %s cluster: %v\n", c.role, err)
			code = max(code, 1)
		}
	}
	if code == 0 {
		_ = os.RemoveAll(root)
	} else {
		fmt.Fprintf(os.Stderr, "cluster data dirs and logs kept in %s\n", root)
	}
	return code
}

// startChild re-executes the test binary in role with its own data dir and waits for its ready file, which
// holds the admin kubeconfig path. The child's output goes to <dir>/child.log.
func startChild(role, dir string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "child.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, dirEnv+"="+dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s child: %w", role, err)
	}
	c := &cluster{role: role, dir: dir, cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait() }()
	kubeconfig, err := waitReady(filepath.Join(dir, "ready"), c.exited)
	if err == nil {
		c.kubeconfig = kubeconfig
		c.client, err = clientFor(kubeconfig)
	}
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s child (log %s): %w", role, logFile.Name(), err)
	}
	return c, nil
}

// clientFor returns an unthrottled-enough clientset for the kubeconfig at path.
func clientFor(path string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfig(cfg)
}

// waitReady polls for the ready file until the child exits or childStartTimeout passes.
func waitReady(path string, exited <-chan error) (string, error) {
	deadline := time.After(childStartTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return "", fmt.Errorf("exited before ready: %v", err)
		case <-deadline:
			return "", fmt.Errorf("not ready within %s", childStartTimeout)
		case <-tick.C:
			if b, err := os.ReadFile(path); err == nil {
				return strings.TrimSpace(string(b)), nil
			}
		}
	}
}

// stop closes the child's stdin, which makes it stop its cluster and exit, and waits for it.
func (c *cluster) stop() error {
	if c == nil {
		return nil
	}
	_ = c.stdin.Close()
	select {
	case err := <-c.exited:
		if err != nil {
			return fmt.Errorf("child: %w (log %s)", err, filepath.Join(c.dir, "child.log"))
		}
		return nil
	case <-time.After(2 * time.Minute):
		_ = c.cmd.Process.Kill()
		return errors.New("child did not stop within 2m; killed")
	}
}

// serveChild is the whole life of a child: start the cluster for role in dir, announce it, serve until stdin
// closes (or SIGTERM/SIGINT), stop. It returns the exit code.
func serveChild(role, dir string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent closed our stdin or died
		cancel()
	}()
	logger := klog.Background().WithName(role)
	ctx = klog.NewContext(ctx, logger)
	cfg, qps, burst := childConfig(role, dir)
	cp, err := controlplane.New(cfg)
	if err != nil {
		logger.Error(err, "Invalid control plane config")
		return 1
	}
	if err := cp.Start(ctx); err != nil {
		logger.Error(err, "Starting the control plane")
		return 1
	}
	managerDone := runOurs(ctx, role, cp, qps, burst)
	code := 0
	if err := writeReady(dir, cp.KubeconfigPath()); err != nil {
		logger.Error(err, "Writing the ready file")
		cancel()
		code = 1
	}
	select {
	case <-ctx.Done():
	case <-cp.Done():
		logger.Error(cp.Err(), "Control plane stopped on its own")
		code = 1
	}
	cancel()
	if err := <-managerDone; err != nil {
		logger.Error(err, "Kubedeploy controllers failed")
		code = 1
	}
	if err := cp.Stop(); err != nil {
		logger.Error(err, "Stopping the control plane")
		code = 1
	}
	klog.Flush()
	return code
}

// shardedEnv, set to N > 0, runs our side as N sharded replicas (manager.Sharding) instead of one manager:
// issue 35's fidelity check, `KUBEDEPLOY_DIFF_SHARDED=3 go test ./test/differential/`.
const shardedEnv = "KUBEDEPLOY_DIFF_SHARDED"

// runOurs starts kubedeploy's controllers for role ours (one manager, or shardedEnv's sharded replicas) and
// returns a channel that yields their joined error once all have returned; for another role, a closed one.
func runOurs(ctx context.Context, role string, cp *controlplane.ControlPlane, qps float32, burst int) <-chan error {
	done := make(chan error, 1)
	if role != roleOurs {
		close(done)
		return done
	}
	replicas, _ := strconv.Atoi(os.Getenv(shardedEnv))
	cfg := manager.Config{RESTConfig: rest.CopyConfig(cp.AdminConfig()), Controllers: manager.KnownControllers,
		Version: "differential", QPS: qps, Burst: burst}
	if replicas < 1 {
		go func() { done <- manager.Run(ctx, cfg) }()
		return done
	}
	errs := make(chan error, replicas)
	for i := range replicas {
		c := cfg
		c.Sharding = manager.Sharding{Enabled: true}
		c.LeaderElection.Identity = fmt.Sprintf("differential-shard-%d", i)
		go func() { errs <- manager.Run(ctx, c) }()
	}
	go func() {
		var all []error
		for range replicas {
			all = append(all, <-errs)
		}
		done <- errors.Join(all...)
	}()
	return done
}

// childConfig is the control plane config of a child for role in dir, with the client rate both sides'
// workload controllers use.
func childConfig(role, dir string) (cfg controlplane.Config, qps float32, burst int) {
	cfg = clusterConfig(dir)
	cfg.UpstreamWorkloadControllers = role == roleUpstream
	// Both sides' workload controllers at upstream's default client rate (CM-6): the reference runs inside
	// kube-controller-manager, whose embedded default is the unthrottled loopback rate.
	qps, burst = float32(20), 30
	cfg.ControllerManagerQPS, cfg.ControllerManagerBurst = qps, burst
	if os.Getenv(conflictRunsEnv) != "" {
		// TestConflictsBesideUpstream: both sides' clients lifted alike.
		qps, burst = liftedQPS, liftedBurst
		cfg.ControllerManagerQPS, cfg.ControllerManagerBurst = qps, burst
	}
	return cfg, qps, burst
}

// writeReady atomically writes <dir>/ready holding the kubeconfig path, so the parent never reads half a file.
func writeReady(dir, kubeconfig string) error {
	tmp := filepath.Join(dir, "ready.tmp")
	if err := os.WriteFile(tmp, []byte(kubeconfig+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "ready"))
}
