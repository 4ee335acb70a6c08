package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/component-base/configz"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// controllerManagerParams is everything controllerManagerArgs needs; all paths are absolute.
type controllerManagerParams struct {
	kubeconfig string
	caFile     string
	caKeyFile  string
	saKeyFile  string
	// controllers are the KCM controllers to run (canonical names, Config.KubeControllers resolved).
	controllers []string
	// upstreamWorkload adds upstreamWorkloadControllers (Config.UpstreamWorkloadControllers, tests only).
	upstreamWorkload bool
	// qps and burst, when > 0, set --kube-api-qps and --kube-api-burst.
	qps   float32
	burst int
}

// controllerManagerArgs returns kube-controller-manager's flags: only p.controllers (plus
// upstreamWorkloadControllers when p.upstreamWorkload is set), no leader election, per-controller service-account
// credentials, our service-account key and CA, the cluster CA as the signer of CertificateSigningRequests, no
// serving port, and the client rate limit when p sets one. It is pure.
func controllerManagerArgs(p controllerManagerParams) []string {
	controllers := slices.Clone(p.controllers)
	if p.upstreamWorkload {
		controllers = append(controllers, upstreamWorkloadControllers...)
	}
	args := []string{
		"--kubeconfig=" + p.kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saKeyFile,
		"--root-ca-file=" + p.caFile,
		"--cluster-signing-cert-file=" + p.caFile,
		"--cluster-signing-key-file=" + p.caKeyFile,
		"--secure-port=0",
		"--profiling=false",
	}
	if p.qps > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%g", p.qps))
	}
	if p.burst > 0 {
		args = append(args, fmt.Sprintf("--kube-api-burst=%d", p.burst))
	}
	return args
}

// forbiddenControllers are KCM controllers kubedeploy replaces; newControllerManager refuses to start them.
var forbiddenControllers = []string{"deployment-controller", "deployment", "replicaset-controller", "replicaset"}

// checkControllers returns an error for the first KCM controller in controllers that the embedded cluster must not
// run: "*" always, and forbiddenControllers unless upstreamWorkload (Config.UpstreamWorkloadControllers) allows
// exactly the two upstreamWorkloadControllers. It is pure.
func checkControllers(controllers []string, upstreamWorkload bool) error {
	for _, c := range controllers {
		allowed := upstreamWorkload && slices.Contains(upstreamWorkloadControllers, c)
		if c == "*" || (slices.Contains(forbiddenControllers, c) && !allowed) {
			return fmt.Errorf("kube-controller-manager must never run controller %q", c)
		}
	}
	return nil
}

// newControllerManager parses args into kube-controller-manager's options and builds its configuration; it refuses
// the controllers checkControllers rejects. The returned function runs the controllers until ctx is cancelled and
// then releases the global configz entry so a later control plane in the same process can start again.
func newControllerManager(ctx context.Context, args []string, upstreamWorkload bool) (func(context.Context) error, error) {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager options: %w", err)
	}
	all, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	namedFlagSets := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &namedFlagSets
	if err := checkControllers(s.Generic.Controllers, upstreamWorkload); err != nil {
		return nil, err
	}
	c, err := s.Config(ctx, all, disabled, aliases)
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager config: %w", err)
	}
	completed := c.Complete()
	return func(ctx context.Context) error {
		defer configz.Delete(kcmapp.ConfigzName)
		err := kcmapp.Run(ctx, completed)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}, nil
}
