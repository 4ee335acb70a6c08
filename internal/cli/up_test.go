package cli

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestUpIdentityStablePerDataDir: `up` on one data dir always leads under
// the same identity, however the dir is spelled, so a restart after kill -9
// takes its own Lease at once; another data dir gets another identity
// (issue 9).
func TestUpIdentityStablePerDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o700); err != nil {
		t.Fatal(err)
	}
	abs := upIdentity(filepath.Join(dir, "data"))
	if rel := upIdentity("data"); rel != abs {
		t.Errorf("identity of ./data %q, of its absolute path %q: want the same", rel, abs)
	}
	if again := upIdentity(filepath.Join(dir, "data")); again != abs {
		t.Errorf("identity changed between calls: %q then %q", abs, again)
	}
	if other := upIdentity(filepath.Join(dir, "other")); other == abs {
		t.Errorf("two data dirs share the identity %q", abs)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(abs, host+"_up-") || len(abs) != len(host)+len("_up-")+12 {
		t.Errorf("identity %q, want %q followed by 12 hex digits", abs, host+"_up-")
	}
}

// TestUpClientRateLimit: up's controllers talk to an in-process
// kube-apiserver over loopback and get the loopback rate limit by default, as
// the embedded scheduler and controller manager do; the flags take
// kube-controller-manager's 20/30 (CM-6) back, and a non-positive value is
// refused rather than silently defaulted (issue 11).
func TestUpClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		qps       float32
		burst     int
		wantError string
	}{
		{args: nil, qps: controlplane.LoopbackQPS, burst: controlplane.LoopbackBurst},
		{args: []string{"--kube-api-qps=20", "--kube-api-burst=30"}, qps: 20, burst: 30},
		{args: []string{"--kube-api-qps=0"}, wantError: "--kube-api-qps must be greater than 0, got 0"},
		{args: []string{"--kube-api-burst=0"}, wantError: "--kube-api-burst must be at least 1, got 0"},
	} {
		mcfg, _, err := upConfigs(t, tc.args...)
		switch {
		case tc.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantError)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case mcfg.QPS != tc.qps || mcfg.Burst != tc.burst:
			t.Errorf("%v: controllers' client at %g/%d, want %g/%d", tc.args, mcfg.QPS, mcfg.Burst, tc.qps, tc.burst)
		}
	}
}

// TestUpOptionsTimeTheClusterAsUp: harness.UpOptions, used by the tests whose
// claim is about `up` (test/integration/upplan), are up's defaults.
func TestUpOptionsTimeTheClusterAsUp(t *testing.T) {
	mcfg, cfg, err := upConfigs(t)
	if err != nil {
		t.Fatal(err)
	}
	h := harness.UpOptions()
	if cfg.Nodes != h.Nodes || cfg.PodStartupDelay != h.PodStartupDelay || cfg.PodTerminationDelay != h.PodTerminationDelay ||
		mcfg.QPS != h.Manager.QPS || mcfg.Burst != h.Manager.Burst {
		t.Errorf("up: %d nodes, pods %v/%v, client %g/%d; harness.UpOptions: %d nodes, pods %v/%v, client %g/%d",
			cfg.Nodes, cfg.PodStartupDelay, cfg.PodTerminationDelay, mcfg.QPS, mcfg.Burst,
			h.Nodes, h.PodStartupDelay, h.PodTerminationDelay, h.Manager.QPS, h.Manager.Burst)
	}
}

// TestUpKubeControllers: up runs kube-controller-manager's default controllers but deployment and replicaset
// unless --kube-controllers trims them, and refuses a list naming KCM's workload controllers or leaving out what up
// needs, naming the flag (issue 22).
func TestUpKubeControllers(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want      []string
		wantError string
	}{
		{args: nil, want: controlplane.DefaultKubeControllers()},
		{args: []string{"--kube-controllers=*,-job,-cronjob"}, want: slices.DeleteFunc(controlplane.DefaultKubeControllers(),
			func(c string) bool { return c == "job-controller" || c == "cronjob-controller" })},
		{args: []string{"--kube-controllers=*,deployment"}, wantError: `--kube-controllers: kube controller "deployment-controller" is never run`},
		{args: []string{"--kube-controllers=*,-serviceaccount"}, wantError: `--kube-controllers: kube controller "serviceaccount-controller" cannot be left out`},
	} {
		_, cfg, err := upConfigs(t, tc.args...)
		switch {
		case tc.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantError)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !slices.Equal(cfg.KubeControllers, tc.want):
			t.Errorf("%v: kube controllers %v, want %v", tc.args, cfg.KubeControllers, tc.want)
		}
	}
}

// TestUpFlagRanges: every numeric flag of up outside its range is refused on one line naming the flag and the
// range, and each bound itself is accepted (issue 33).
func TestUpFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantError string
	}{
		{[]string{"--zones=0"}, "--zones must be in 1..26, got 0"},
		{[]string{"--zones=27", "--nodes=30"}, "--zones must be in 1..26, got 27"},
		{[]string{"--zones=4"}, "--zones must be at most --nodes (3), got 4: every zone needs a node"},
		{[]string{"--nodes=0"}, "--nodes must be in 1..1000, got 0"},
		{[]string{"--nodes=1001"}, "--nodes must be in 1..1000, got 1001"},
		{[]string{"--api-port=-1"}, "--api-port must be in 0..65535, got -1"},
		{[]string{"--api-port=65536"}, "--api-port must be in 0..65535, got 65536"},
		{[]string{"--pod-startup-delay=-1s"}, "--pod-startup-delay must be greater than 0, got -1s"},
		{[]string{"--pod-startup-delay=0"}, "--pod-startup-delay must be greater than 0, got 0s"},
		{[]string{"--pod-termination-delay=-500ms"}, "--pod-termination-delay must be greater than 0, got -500ms"},
		{[]string{"--kube-api-qps=-1"}, "--kube-api-qps must be greater than 0, got -1"},
		{[]string{"--kube-api-qps=NaN"}, "--kube-api-qps must be greater than 0, got NaN"},
		{[]string{"-v=-1"}, "-v must be at least 0, got -1"},
		{[]string{"--zones=26", "--nodes=1000", "--api-port=65535", "--pod-startup-delay=1ns", "-v=0"}, ""},
		{[]string{"--zones=1", "--nodes=1", "--api-port=0", "--kube-api-burst=1"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := upConfigs(t, tc.args...)
			switch {
			case tc.wantError == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantError != "" && (err == nil || err.Error() != tc.wantError):
				t.Errorf("error %v, want %q", err, tc.wantError)
			}
		})
	}
}

// TestUpFeatureGatesAndAudit: --feature-gates reaches the control plane's Config as given (merged over
// ShardedListAndWatch=true there), the audit flags too; a bad gate, a missing or invalid policy file, or one audit
// flag without the other is refused on one line naming the flag (issue 35).
func TestUpFeatureGatesAndAudit(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	notPolicy := filepath.Join(dir, "not-policy.yaml")
	for path, content := range map[string]string{policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
		notPolicy: "apiVersion: v1\nkind: ConfigMap\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing, log := filepath.Join(dir, "missing.yaml"), filepath.Join(dir, "audit.log")
	for _, tc := range []struct {
		args      []string
		want      controlplane.Config
		wantError string
	}{
		{args: nil},
		{args: []string{"--feature-gates=ShardedListAndWatch=false"}, want: controlplane.Config{FeatureGates: "ShardedListAndWatch=false"}},
		{args: []string{"--audit-policy-file", policy, "--audit-log-path", log}, want: controlplane.Config{AuditPolicyFile: policy, AuditLogPath: log}},
		{args: []string{"--feature-gates=ShardedListAndWatch"}, wantError: `--feature-gates: "ShardedListAndWatch" is not Name=true or Name=false`},
		{args: []string{"--feature-gates=ShardedListAndWatch=yes"}, wantError: `--feature-gates: "ShardedListAndWatch=yes" is not Name=true or Name=false`},
		{args: []string{"--feature-gates=NoSuchGate=true"}, wantError: "--feature-gates: unrecognized feature gate: NoSuchGate"},
		{args: []string{"--audit-policy-file", missing, "--audit-log-path", log}, wantError: "--audit-policy-file " + missing + " does not exist"},
		{args: []string{"--audit-policy-file", notPolicy, "--audit-log-path", log}, wantError: "--audit-policy-file " + notPolicy + ": "},
		{args: []string{"--audit-log-path", log}, wantError: "--audit-log-path needs --audit-policy-file: without a policy kube-apiserver audits nothing"},
		{args: []string{"--audit-policy-file", policy}, wantError: "--audit-policy-file needs --audit-log-path, the file the audit events go to"},
		{args: []string{"--audit-policy-file", policy, "--audit-log-path", "-"}, wantError: `--audit-log-path "-" (standard output) is not supported: give a file`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, cfg, err := upConfigs(t, tc.args...)
			switch {
			case tc.wantError != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one starting %q", err, tc.wantError)
				}
			case err != nil:
				t.Fatal(err)
			case cfg.FeatureGates != tc.want.FeatureGates || cfg.AuditPolicyFile != tc.want.AuditPolicyFile || cfg.AuditLogPath != tc.want.AuditLogPath:
				t.Errorf("config gates %q, audit %q %q; want %q, %q %q", cfg.FeatureGates, cfg.AuditPolicyFile, cfg.AuditLogPath,
					tc.want.FeatureGates, tc.want.AuditPolicyFile, tc.want.AuditLogPath)
			}
		})
	}
}

// TestUpFailsBeforeTouchingTheDataDir: up with a busy --api-port, or a flag out of range, returns one line naming
// the problem, prints nothing else, and leaves the data dir as it was: a new one is not created, an existing one
// keeps exactly its contents (issue 33).
func TestUpFailsBeforeTouchingTheDataDir(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	busy := "kube-apiserver port 127.0.0.1:" + port + " is already in use"
	existing := t.TempDir()
	for name, content := range map[string]string{"lock": "1\n", "kubeconfig": "k", "logs/stderr.log": "crash\n"} {
		path := filepath.Join(existing, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, dataDir string
		args          []string
		want          string
	}{
		{"busy port, new data dir", filepath.Join(t.TempDir(), "new"), []string{"--api-port", port}, busy},
		{"busy port, existing data dir", existing, []string{"--api-port", port}, busy},
		{"zones 0", filepath.Join(t.TempDir(), "new"), []string{"--zones", "0"}, "--zones must be in 1..26, got 0"},
		{"negative delay, existing data dir", existing, []string{"--pod-startup-delay=-1s"}, "--pod-startup-delay must be greater than 0, got -1s"},
		{"unknown feature gate, existing data dir", existing, []string{"--feature-gates=NoSuchGate=true"}, "--feature-gates: unrecognized feature gate: NoSuchGate"},
		{"missing audit policy, new data dir", filepath.Join(t.TempDir(), "new"), []string{"--audit-policy-file=/nonexistent/policy.yaml", "--audit-log-path=/tmp/audit.log"},
			"--audit-policy-file /nonexistent/policy.yaml does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dirContents(t, tc.dataDir)
			out, err := execute(t, NewRootCommand(), append([]string{"up", "--data-dir", tc.dataDir}, tc.args...)...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q besides the error", out)
			}
			if after := dirContents(t, tc.dataDir); !reflect.DeepEqual(after, before) {
				t.Errorf("data dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// dirContents returns each file's path under dir with its content, and each directory's path; nil if dir does
// not exist.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			out[path] = "dir"
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// upConfigs parses up's flags from args (with a fresh --data-dir) and returns upOptions.configs' result.
func upConfigs(t *testing.T, args ...string) (manager.Config, controlplane.Config, error) {
	t.Helper()
	var o upOptions
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(append([]string{"--data-dir", t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	return o.configs()
}
