package controllerscmd

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
)

// parseControllersFlags parses args into a fresh `controllers` command's options and builds its config.
func parseControllersFlags(t *testing.T, args ...string) (manager.Config, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "controllers"}
	o := controllersOptions{logging: logsapi.NewLoggingConfiguration()}
	addControllersFlags(cmd, &o)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("parsing %v: %v", args, err)
	}
	return o.config()
}

// TestControllersDefaultsMatchKubeControllerManager: CM-1, CM-6, CM-7.
func TestControllersDefaultsMatchKubeControllerManager(t *testing.T) {
	cfg, err := parseControllersFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	le := cfg.LeaderElection
	if strings.Join(cfg.Controllers, ",") != "deployment,replicaset" || cfg.ConcurrentDeploymentSyncs != 5 ||
		cfg.ConcurrentReplicaSetSyncs != 5 || cfg.QPS != 20 || cfg.Burst != 30 {
		t.Errorf("defaults = %+v", cfg)
	}
	if !le.Enabled || le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second ||
		le.ResourceName != "kubedeploy-controllers" || le.ResourceNamespace != "kube-system" || le.Identity == "" {
		t.Errorf("leader election defaults = %+v", le)
	}
	if cfg.Serving.Port != manager.DefaultSecurePort || cfg.Serving.BindAddress != "127.0.0.1" {
		t.Errorf("serving defaults = %+v", cfg.Serving)
	}
}

func TestControllersFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--controllers=statefulset"}, `unknown controller "statefulset"`},
		{[]string{"--controllers="}, "names no controller"},
		{[]string{"--leader-elect-renew-deadline=20s"}, "lease-duration"},
		{[]string{"--concurrent-deployment-syncs=-1"}, "at least 1"},
		{[]string{"--secure-port=70000"}, "secure-port"},
		{[]string{"--bind-address=localhost"}, "bind-address"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps must be > 0"},
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst >= 1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseControllersFlags(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := parseControllersFlags(t, "--leader-elect=false", "--leader-elect-renew-deadline=20s", "--secure-port=0"); err != nil {
		t.Errorf("leader election off ignores its durations, port 0 disables serving: %v", err)
	}
}
