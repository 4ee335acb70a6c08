// Command conformance runs upstream Kubernetes' own end-to-end specs for what kubedeploy implements, the
// "[sig-apps] Deployment" and "[sig-apps] ReplicaSet" specs of k8s.io/kubernetes/test/e2e at the version
// kubedeploy embeds, against a fresh `kubedeploy up`, and prints pass, fail or skip per spec (issue 22).
//
//	go run ./test/conformance                     # on kubedeploy's controllers
//	go run ./test/conformance -side upstream      # on kube-controller-manager's own, same kind of cluster
//	go run ./test/conformance -side both          # one after the other, then the specs whose outcome differs
//	go run ./test/conformance -e2e /tmp/e2e.test  # with a prebuilt e2e binary
//
// It builds `kubedeploy` and upstream's e2e binary (`go test -c k8s.io/kubernetes/test/e2e`, several minutes the
// first time on 2 cores), starts `kubedeploy up` on a fresh data dir and a free port (for the upstream side with
// `--controllers=` and upstream kube-controller-manager running only its deployment and replicaset controllers,
// built from the same k8s.io/kubernetes), and runs the specs with --provider=skeleton. Serial, Disruptive and Flaky
// specs are skipped, provider-specific ones skip themselves, and the specs in simulatedPodSkips are skipped by
// name with the reason; nothing else is. It exits 1 if a spec failed, none passed, a spec named in
// simulatedPodSkips no longer exists, or (-side both) the sides' outcomes differ. Run it from the repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	sideOurs     = "kubedeploy"
	sideUpstream = "upstream"
	sideBoth     = "both"
)

type options struct {
	side    string
	e2e     string
	work    string
	keep    bool
	timeout time.Duration
	// sharded, when > 0, runs kubedeploy's side as that many `kubedeploy controllers --sharding` processes
	// against `up --controllers=` (issue 35's fidelity check) instead of up's own controllers.
	sharded int
}

func main() {
	var o options
	flag.StringVar(&o.side, "side", sideOurs, "whose Deployment and ReplicaSet controllers run: kubedeploy, upstream or both")
	flag.StringVar(&o.e2e, "e2e", "", "a prebuilt upstream e2e binary (default: build it with go test -c k8s.io/kubernetes/test/e2e)")
	flag.StringVar(&o.work, "work", "", "directory for the binaries, the clusters' data dirs, e2e logs and reports (default: a new temporary one)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory after a passing run (a failing run always keeps it)")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "how long one side's e2e run may take")
	flag.IntVar(&o.sharded, "sharded", 0, "run kubedeploy's side as this many `kubedeploy controllers --sharding` replicas beside `up --controllers=` (0: up's own controllers)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

// run builds what o needs, runs each side o names and checks the results; it returns why the run failed.
func run(ctx context.Context, o options) error {
	var sides []string
	switch o.side {
	case sideOurs, sideUpstream:
		sides = []string{o.side}
	case sideBoth:
		sides = []string{sideOurs, sideUpstream}
	default:
		return fmt.Errorf("-side must be %s, %s or %s, got %q", sideOurs, sideUpstream, sideBoth, o.side)
	}
	if o.sharded < 0 || o.sharded > 16 {
		return fmt.Errorf("-sharded must be in 0..16, got %d", o.sharded)
	}
	work, err := workDir(o.work)
	if err != nil {
		return err
	}
	bins, err := build(ctx, work, o.e2e, o.side != sideOurs)
	if err != nil {
		return err
	}
	results := map[string][]Result{}
	var failed error
	for _, side := range sides {
		res, err := runSide(ctx, bins, work, side, o.timeout, o.sharded)
		if err != nil {
			return fmt.Errorf("%s side: %w (logs in %s)", side, err, work)
		}
		printResults(os.Stdout, side, res)
		results[side] = res
		if err := check(res); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s side: %w", side, err))
		}
	}
	if o.side == sideBoth && compare(os.Stdout, sideOurs, sideUpstream, results[sideOurs], results[sideUpstream]) > 0 {
		failed = errors.Join(failed, errors.New("kubedeploy's and upstream's outcomes differ"))
	}
	if failed != nil {
		return fmt.Errorf("%w (logs in %s)", failed, work)
	}
	if !o.keep && o.work == "" {
		return os.RemoveAll(work)
	}
	fmt.Printf("logs and reports kept in %s\n", work)
	return nil
}

// workDir returns dir, created if needed, or a new temporary directory when dir is empty.
func workDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "kubedeploy-conformance-")
	}
	return dir, os.MkdirAll(dir, 0o755)
}
