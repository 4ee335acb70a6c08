package manager

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestParseControllers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"deployment,replicaset", []string{"deployment", "replicaset"}},
		{"replicaset, deployment", []string{"deployment", "replicaset"}},
		{"*", []string{"deployment", "replicaset"}},
		{"", nil},
		{"deployment,deployment", []string{"deployment"}},
	} {
		if got := ParseControllers(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseControllers(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		c := Config{RESTConfig: &rest.Config{}, Controllers: []string{"deployment"}}
		c.Default()
		return c
	}
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"no rest config", func(c *Config) { c.RESTConfig = nil }, "no API server"},
		{"unknown controller", func(c *Config) { c.Controllers = []string{"statefulset"} }, `unknown controller "statefulset"`},
		{"repeated controller", func(c *Config) { c.Controllers = []string{"deployment", "deployment"} }, "listed twice"},
		{"zero workers", func(c *Config) { c.ConcurrentReplicaSetSyncs = -1 }, "at least 1"},
		{"bad qps", func(c *Config) { c.QPS = -1 }, "kube-api-qps"},
		{"leader election off ignores durations", func(c *Config) { c.LeaderElection.RenewDeadline = time.Hour }, ""},
		{"renew deadline above lease duration", func(c *Config) {
			c.LeaderElection.Enabled, c.LeaderElection.RenewDeadline = true, time.Hour
		}, "lease-duration"},
		{"retry period above renew deadline", func(c *Config) {
			c.LeaderElection.Enabled, c.LeaderElection.RetryPeriod = true, 11*time.Second
		}, "lease-duration"},
		{"leader election defaults", func(c *Config) { c.LeaderElection.Enabled = true }, ""},
		{"bad port", func(c *Config) { c.Serving.Port = 65536 }, "secure-port"},
		{"bad bind address", func(c *Config) { c.Serving.BindAddress = "example.com" }, "bind-address"},
		{"negative probe interval", func(c *Config) { c.Connectivity.ProbeInterval = -time.Second }, "probe interval"},
		{"negative log interval", func(c *Config) { c.Connectivity.LogEvery = -time.Second }, "log interval"},
		{"observe mode", func(c *Config) { c.Observe, c.Controllers = true, nil }, ""},
		{"observe mode with controllers", func(c *Config) { c.Observe = true }, "observe mode runs no controllers"},
		{"observe mode with leader election", func(c *Config) {
			c.Observe, c.Controllers, c.LeaderElection.Enabled = true, nil, true
		}, "observe mode runs no controllers"},
		{"profiling over plain HTTP", func(c *Config) { c.Serving.Plain, c.Serving.Profiling = true, true }, "profiling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDefaultsMatchKubeControllerManager(t *testing.T) {
	var c Config
	c.Default()
	// CM-1, CM-6
	if c.ConcurrentDeploymentSyncs != 5 || c.ConcurrentReplicaSetSyncs != 5 || c.QPS != 20 || c.Burst != 30 {
		t.Errorf("defaults = %+v", c)
	}
	if got := UserAgent("deployment", "v1"); got != "kubedeploy-deployment-controller/v1" {
		t.Errorf("UserAgent = %q", got)
	}
	if got := EventSource("replicaset"); got != "replicaset-controller" {
		t.Errorf("EventSource = %q", got)
	}
	// Observe mode serves over plain HTTP (issue 25): its RBAC allows no TokenReview.
	o := Config{Observe: true}
	o.Default()
	if !o.Serving.Plain {
		t.Errorf("observe mode's defaults serve HTTPS")
	}
}

func TestLeaderElectionDefaults(t *testing.T) {
	var c Config
	c.Default()
	le := c.LeaderElection
	// CM-7, with our own Lease name
	if le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second ||
		le.ResourceName != "kubedeploy-controllers" || le.ResourceNamespace != "kube-system" {
		t.Errorf("leader election defaults = %+v", le)
	}
	var other Config
	other.Default()
	if le.Identity == "" || le.Identity == other.LeaderElection.Identity {
		t.Errorf("identities %q and %q: want distinct, non-empty", le.Identity, other.LeaderElection.Identity)
	}
}

// TestLeaderElectionOverlap: the defaults (15s/10s/2s) let a cut-off leader
// give up before a standby may take over; settings where retry-period +
// renew-deadline reach lease-duration, or where a sub-second retry period
// lets the standby count from up to a second early, are named (CM-7).
func TestLeaderElectionOverlap(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		lease, renew, retry  time.Duration
		enabled, wantWarning bool
	}{
		{"defaults", 15 * time.Second, 10 * time.Second, 2 * time.Second, true, false},
		{"disabled", 3 * time.Second, 2 * time.Second, 2 * time.Second, false, false},
		{"give up at expiry", 15 * time.Second, 10 * time.Second, 5 * time.Second, true, true},
		{"whole-second retry, room left", 4 * time.Second, 2 * time.Second, time.Second, true, false},
		{"sub-second retry within a second of expiry", 3 * time.Second, 2 * time.Second, 500 * time.Millisecond, true, true},
		{"sub-second retry, room left", 4 * time.Second, 2 * time.Second, 500 * time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := LeaderElection{Enabled: tc.enabled, LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
			if got := l.Overlap(); (got != "") != tc.wantWarning {
				t.Errorf("Overlap() = %q, want a warning: %v", got, tc.wantWarning)
			}
		})
	}
}
