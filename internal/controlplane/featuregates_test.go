package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// TestFeatureGates: Config.FeatureGates is merged over DefaultFeatureGates (ShardedListAndWatch on) into one
// sorted --feature-gates value, and whatever kube-apiserver would refuse is refused, naming the pair or gate.
func TestFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		name, overrides, want, wantErr string
	}{
		{name: "default", want: "ShardedListAndWatch=true"},
		{name: "turned off", overrides: "ShardedListAndWatch=false", want: "ShardedListAndWatch=false"},
		{name: "another gate, sorted", overrides: " SizeBasedListCostEstimate=false , ", want: "ShardedListAndWatch=true,SizeBasedListCostEstimate=false"},
		{name: "locked gate", overrides: "InPlacePodVerticalScaling=false", wantErr: "cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true"},
		{name: "later pair wins", overrides: "ShardedListAndWatch=false,ShardedListAndWatch=1", want: "ShardedListAndWatch=true"},
		{name: "no value", overrides: "ShardedListAndWatch", wantErr: `"ShardedListAndWatch" is not Name=true or Name=false`},
		{name: "not a bool", overrides: "ShardedListAndWatch=on", wantErr: `"ShardedListAndWatch=on" is not Name=true or Name=false`},
		{name: "no name", overrides: "=true", wantErr: `"=true" is not Name=true or Name=false`},
		{name: "unknown gate", overrides: "NoSuchGate=true", wantErr: "unrecognized feature gate: NoSuchGate"},
		{name: "component prefix", overrides: "kube:ShardedListAndWatch=true", wantErr: "unrecognized feature gate: kube:ShardedListAndWatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := featureGates(tc.overrides)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("featureGates(%q) = %q, %v; want error containing %q", tc.overrides, got, err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("featureGates(%q): %v", tc.overrides, err)
			case got != tc.want:
				t.Fatalf("featureGates(%q) = %q, want %q", tc.overrides, got, tc.want)
			}
		})
	}
}

// TestAPIServerArgsFeatureGatesAndAudit: the feature gates are always passed; the audit flags only when set.
func TestAPIServerArgsFeatureGatesAndAudit(t *testing.T) {
	args := apiserverArgs(apiserverParams{featureGates: "ShardedListAndWatch=true"})
	assertFlags(t, args, map[string]string{"feature-gates": "ShardedListAndWatch=true"})
	for _, name := range []string{"audit-policy-file", "audit-log-path"} {
		if v, ok := flagValue(args, name); ok {
			t.Errorf("--%s=%s without an audit policy", name, v)
		}
	}
	args = apiserverArgs(apiserverParams{featureGates: "ShardedListAndWatch=false",
		auditPolicyFile: "/p/policy.yaml", auditLogPath: "/l/audit.log"})
	assertFlags(t, args, map[string]string{
		"feature-gates":     "ShardedListAndWatch=false",
		"audit-policy-file": "/p/policy.yaml",
		"audit-log-path":    "/l/audit.log",
	})
}

// TestAPIServerOptionsResetFeatureGates: feature gates are process-global, so each kube-apiserver's options start
// from the defaults: a gate an earlier control plane in this process turned on is off again unless the new one
// turns it on too, and --feature-gates really reaches utilfeature.DefaultFeatureGate, which kube-apiserver reads.
func TestAPIServerOptionsResetFeatureGates(t *testing.T) {
	t.Cleanup(func() {
		if err := resetFeatureGates(); err != nil {
			t.Error(err)
		}
	})
	sharded := func() bool { return utilfeature.DefaultFeatureGate.Enabled(genericfeatures.ShardedListAndWatch) }
	for _, step := range []struct {
		args []string
		want bool
	}{
		{[]string{"--feature-gates=ShardedListAndWatch=true"}, true},
		{nil, false},
		{[]string{"--feature-gates=ShardedListAndWatch=true"}, true},
		{[]string{"--feature-gates=ShardedListAndWatch=false"}, false},
		{[]string{"--feature-gates=ShardedListAndWatch=true,ShardedListAndWatch=false"}, false},
	} {
		if _, err := apiserverOptions(step.args); err != nil {
			t.Fatalf("apiserverOptions(%v): %v", step.args, err)
		}
		if got := sharded(); got != step.want {
			t.Errorf("after apiserverOptions(%v): ShardedListAndWatch enabled %v, want %v", step.args, got, step.want)
		}
	}
	// No unknown gate here: kube-apiserver's Set records it in the process's gate before refusing it, and no
	// public call removes it again, so every later Set in the process would fail. Config.Validate refuses
	// unknown gates (on a copy of the gate, TestFeatureGates) before anything reaches kube-apiserver.
}

// TestConfigValidateAudit: the audit policy and log path come together, "-" is refused, and a policy file that is
// missing or not a policy fails Validate, before anything starts.
func TestConfigValidateAudit(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	writeTestFile(t, policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
	notPolicy := filepath.Join(dir, "not-policy.yaml")
	writeTestFile(t, notPolicy, "apiVersion: v1\nkind: ConfigMap\n")
	missing := filepath.Join(dir, "missing.yaml")
	log := filepath.Join(dir, "audit", "audit.log")
	for _, tc := range []struct {
		name, policy, log, wantErr string
	}{
		{name: "none"},
		{name: "both", policy: policy, log: log},
		{name: "log without policy", log: log, wantErr: "an audit log path needs an audit policy file"},
		{name: "policy without log", policy: policy, wantErr: "an audit policy file needs an audit log path"},
		{name: "stdout", policy: policy, log: "-", wantErr: `audit log path "-" (standard output) is not supported`},
		{name: "missing policy", policy: missing, log: log, wantErr: "audit policy file " + missing + " does not exist"},
		{name: "not a policy", policy: notPolicy, log: log, wantErr: "audit policy file " + notPolicy + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{DataDir: dir, AuditPolicyFile: tc.policy, AuditLogPath: tc.log}
			c.Default()
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := os.Stat(filepath.Dir(log)); !os.IsNotExist(err) {
		t.Errorf("Validate created the audit log's directory (stat: %v)", err)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
