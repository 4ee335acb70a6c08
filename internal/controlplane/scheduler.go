package controlplane

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/component-base/configz"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// schedulerConfigzName is the configz entry kube-scheduler registers globally.
const schedulerConfigzName = "componentconfig"

// schedulerArgs returns kube-scheduler's flags: the default profile, no leader election, no serving port, and
// the loopback client rate limit (LoopbackQPS, LoopbackBurst) instead of its 50/100, which bounded how fast pods
// were bound. (--kube-api-qps/--kube-api-burst are deprecated in favour of a config file's clientConnection,
// but still applied when no --config is given, as here.) It is pure.
func schedulerArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--profiling=false",
		fmt.Sprintf("--kube-api-qps=%d", LoopbackQPS),
		fmt.Sprintf("--kube-api-burst=%d", LoopbackBurst),
	}
}

// newScheduler parses args and builds kube-scheduler with the default profile. ctx must live as long as the
// scheduler runs: its informers are bound to it. The returned function schedules pods until ctx is cancelled.
func newScheduler(ctx context.Context, args []string) (func(context.Context) error, error) {
	opts := schedoptions.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-scheduler flags: %w", err)
	}
	cc, sched, err := schedapp.Setup(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler setup: %w", err)
	}
	return func(ctx context.Context) error {
		defer configz.Delete(schedulerConfigzName)
		err := schedapp.Run(ctx, cc, sched)
		if ctx.Err() != nil {
			// Without leader election Run always ends with "finished without leader elect".
			return nil
		}
		return err
	}, nil
}
