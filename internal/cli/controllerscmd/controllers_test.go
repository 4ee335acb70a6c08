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
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps must be greater than 0, got 0"},
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst must be at least 1, got 0"},
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

// TestControllersFlagRanges: each numeric flag outside its range is refused with one line naming the flag and the
// range; zero is refused where manager.Config would turn it into a default (issue 33).
func TestControllersFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--concurrent-deployment-syncs=0"}, "--concurrent-deployment-syncs must be at least 1, got 0"},
		{[]string{"--concurrent-replicaset-syncs=0"}, "--concurrent-replicaset-syncs must be at least 1, got 0"},
		{[]string{"--kube-api-qps=-3"}, "--kube-api-qps must be greater than 0, got -3"},
		{[]string{"--leader-elect-lease-duration=0"}, "--leader-elect-lease-duration must be greater than 0, got 0s"},
		{[]string{"--leader-elect-renew-deadline=-1s"}, "--leader-elect-renew-deadline must be greater than 0, got -1s"},
		{[]string{"--leader-elect=false", "--leader-elect-retry-period=-2s"}, "--leader-elect-retry-period must be greater than 0, got -2s"},
		{[]string{"--leader-elect-retry-period=10s"}, "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period (10s), got 10s"},
		{[]string{"--leader-elect-renew-deadline=20s"}, "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline (20s), got 15s"},
		{[]string{"--leader-elect=false", "--sharding", "--leader-elect-retry-period=10s"}, "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period (10s), got 10s"},
		{[]string{"--sharding", "--shard-buckets=0"}, "--shard-buckets must be in 1..1024, got 0"},
		{[]string{"--sharding", "--shard-buckets=1025"}, "--shard-buckets must be in 1..1024, got 1025"},
		{[]string{"--secure-port=-1"}, "--secure-port must be in 0..65535, got -1"},
		{[]string{"--secure-port=65536"}, "--secure-port must be in 0..65535, got 65536"},
		{[]string{"--log-flush-frequency=0"}, "--log-flush-frequency must be greater than 0, got 0s"},
		{[]string{"--log-text-info-buffer-size=-1"}, "--log-text-info-buffer-size must be at least 0, got -1"},
		{[]string{"--log-json-info-buffer-size=-1Ki"}, "--log-json-info-buffer-size must be at least 0, got -1024"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseControllersFlags(t, tc.args...)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	if _, err := parseControllersFlags(t, "--concurrent-deployment-syncs=1", "--concurrent-replicaset-syncs=1", "--kube-api-burst=1",
		"--secure-port=65535", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=1s"); err != nil {
		t.Errorf("the bounds themselves: %v", err)
	}
}

// EX-6: --prometheus-url and --analysis-allowed-addresses reach the manager's configuration; a value that is not
// an http(s) URL is refused naming the flag.
func TestAnalysisFlags(t *testing.T) {
	cfg, err := parseControllersFlags(t, "--prometheus-url=http://prometheus.monitoring:9090", "--analysis-allowed-addresses=http://a:9090,https://b")
	if err != nil || cfg.Prometheus.DefaultAddress != "http://prometheus.monitoring:9090" || len(cfg.Prometheus.AllowedAddresses) != 2 {
		t.Fatalf("config %+v, %v", cfg.Prometheus, err)
	}
	for _, tc := range []struct{ arg, flag string }{
		{"--prometheus-url=prometheus:9090", "--prometheus-url"},
		{"--analysis-allowed-addresses=ftp://x", "--analysis-allowed-addresses"},
	} {
		if _, err := parseControllersFlags(t, tc.arg); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: %v, want an error naming %s", tc.arg, err, tc.flag)
		}
	}
}
