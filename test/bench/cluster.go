package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// binaries are the paths of the programs the bench runs.
type binaries struct {
	kubedeploy, controllers, upstream string
	// floor is test/bench/floor, the shards mode's informers-only side.
	floor string
	// oursArgs are -kubedeploy-args: appended to the command line of every kubedeploy controllers process
	// (controllerArgs), after the bench's own flags, so a flag given there wins over them (a sharded side's
	// --sharding flags and -shard-concurrency come after it).
	oursArgs []string
	// env is -controller-env: KEY=value entries added to the environment of every controllers process of every
	// side, the shards mode's floor driver included (startProcess's env).
	env []string
}

// build compiles the four binaries into dir/bin with `go build` (the build cache makes repeated runs quick).
func build(ctx context.Context, dir string) (binaries, error) {
	bin := filepath.Join(dir, "bin")
	b := binaries{
		kubedeploy:  filepath.Join(bin, "kubedeploy"),
		controllers: filepath.Join(bin, "kubedeploy-controllers"),
		upstream:    filepath.Join(bin, "upstreamkcm"),
		floor:       filepath.Join(bin, "floor"),
	}
	for out, pkg := range map[string]string{
		b.kubedeploy:  "./cmd/kubedeploy",
		b.controllers: "./cmd/kubedeploy-controllers",
		b.upstream:    "./internal/controlplane/upstreamkcm",
		b.floor:       "./test/bench/floor",
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s (run the bench from the repository root): %v\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// cluster is the running `kubedeploy up --controllers=` child.
type cluster struct {
	cmd        *exec.Cmd
	exited     chan error
	dir        string
	kubeconfig string
	server     string
	// client writes at an unthrottled rate and counts its own writes (ownWrites).
	client    kubernetes.Interface
	ownWrites *writeCounter
	// metrics reads the controllers' /metrics.
	metrics *http.Client
}

// benchKubeControllers are the kube-controller-manager controllers of the cluster the sides are measured on: the
// generic ones `up` ran before issue 22 made it a whole cluster. Pods, ReplicaSets and Deployments then wake no
// controller besides the garbage collector, and the figures stay comparable with docs/performance.md's.
const benchKubeControllers = "garbage-collector-controller,namespace-controller,serviceaccount-controller," +
	"serviceaccount-token-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller," +
	"clusterrole-aggregation-controller,statefulset-controller"

// startCluster runs `kubedeploy up` with a data dir under work and waits for its ready message (at most 5
// minutes): as `up` runs by default when controllers is set (the idle measurement), else with `--controllers=`
// so that the bench runs each side's, and benchKubeControllers; extra (-up-args) follows. Its output goes to
// work/up.log.
func startCluster(ctx context.Context, bins binaries, work string, nodes int, controllers bool, extra ...string) (*cluster, error) {
	dir := filepath.Join(work, "cluster")
	log, err := os.Create(filepath.Join(work, "up.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{"up", "--data-dir", dir, "--api-port", "0", fmt.Sprintf("--nodes=%d", nodes)}
	if !controllers {
		args = append(args, "--controllers=", "--kube-controllers="+benchKubeControllers)
	}
	args = append(args, extra...)
	cmd := exec.Command(bins.kubedeploy, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = diesWithBench()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &cluster{cmd: cmd, exited: make(chan error, 1), dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	go func() { c.exited <- cmd.Wait() }()
	deadline := time.After(5 * time.Minute)
	for !c.ready(log.Name()) {
		select {
		case err := <-c.exited:
			return nil, fmt.Errorf("kubedeploy up exited before it was ready (%v); see %s", err, log.Name())
		case <-deadline:
			_ = c.stop()
			return nil, fmt.Errorf("kubedeploy up not ready after 5 minutes; see %s", log.Name())
		case <-ctx.Done():
			_ = c.stop()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		_ = c.stop()
		return nil, err
	}
	c.server = cfg.Host
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the bench must not be what is measured
	c.ownWrites = &writeCounter{}
	cfg.Wrap(c.ownWrites.wrap)
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = c.stop()
		return nil, err
	}
	if c.metrics, err = metricsClient(c.kubeconfig); err != nil {
		_ = c.stop()
		return nil, err
	}
	return c, nil
}

// ready reports whether up printed its ready message's last line to the log at path.
func (c *cluster) ready(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), "Press Ctrl-C to stop")
}

// stop interrupts up (Ctrl-C) and waits up to a minute for it to exit, then kills it.
func (c *cluster) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-c.exited:
		return err
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("kubedeploy up did not stop within a minute of SIGINT; killed")
	}
}

// machine describes this machine for the table's header: OS/arch, CPUs and the CPU model.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model)
}
