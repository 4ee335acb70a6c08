package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// runPlan runs `rollout plan args...` and returns its output or error.
func runPlan(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand(Options{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"plan"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

const seed = "../../../examples/nginx-deployment.yaml"

// --local with the example Deployment (issue 11): the table names both
// ReplicaSets and ends with the summary; -o json has the documented shape.
func TestPlanLocalSeed(t *testing.T) {
	out, err := runPlan(t, "--local", "-f", seed, "--image", "nginx-deployment=nginx:1.9.3")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"deployment/nginx-deployment: 20 replicas, RollingUpdate (maxSurge 25%, maxUnavailable 25%)",
		"STEP", "NEW nginx-deployment-", "OLD nginx-deployment-", "TOTAL", "AVAILABLE",
		"5 steps; at most 25 pods, at least 15 available; complete after about 2s.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runPlan(t, "--local", "-f", seed, "--image", "*=nginx:1.9.3", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, key := range []string{"steps", "peakPods", "minAvailable", "estimatedSeconds"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("json lacks %q: %s", key, out)
		}
	}
	var p simulator.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Steps[0].NewReplicas != 5 || p.Steps[0].OldReplicas[0] != 15 || p.Steps[0].MaxTotal != 20 || p.Steps[0].MinAvailable != 15 {
		t.Errorf("first step %+v", p.Steps[0])
	}
}

// Two versions of one Deployment in --local mode: the first is current, the
// last the new one; defaults (VA-1) fill what the manifests leave out, so a
// Recreate manifest without rollingUpdate plans old-to-0 then new-to-full.
func TestPlanLocalTwoVersions(t *testing.T) {
	dir := t.TempDir()
	v1 := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  strategy: {type: Recreate}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1"}]}
`
	v2 := strings.Replace(v1, "nginx:1", "nginx:2", 1)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, err := runPlan(t, "--local", "-f", write("v1.yaml", v1), "-f", write("v2.yaml", "# new\n---\n"+v2), "-o", "json", "--pod-termination", "1")
	if err != nil {
		t.Fatal(err)
	}
	var p simulator.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 2 || p.Steps[0].OldReplicas[0] != 0 || p.Steps[1].NewReplicas != 4 || p.Steps[1].Seconds != 1 || p.EstimatedSeconds != 2 {
		t.Errorf("plan %+v", p)
	}
	// The same manifest twice is no rollout.
	out, err = runPlan(t, "--local", "-f", write("same.yaml", v1))
	if err != nil || !strings.Contains(out, "No rollout") {
		t.Errorf("unchanged manifest: %v\n%s", err, out)
	}
}

// Bad input gets an error that says what to fix.
func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "svc.yaml")
	if err := os.WriteFile(svc, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicaz: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--local"}, "name the Deployment"},
		{[]string{"--local", "-f", svc}, "is not an apps/v1 Deployment or ReplicaSet"},
		{[]string{"--local", "-f", seed, "--image", "nope=nginx:2"}, `has no container "nope" (it has nginx-deployment)`},
		{[]string{"--local", "-f", seed, "--image", "nginx:2"}, "use CONTAINER=IMAGE"},
		{[]string{"--local", "-f", seed, "-o", "yaml"}, "use table or json"},
		{[]string{"--local", "-f", seed, "--pod-startup", "0"}, "--pod-startup must be > 0"},
		{[]string{"svc/x", "--local"}, "is not a Deployment"},
		{[]string{"--local", "-f", filepath.Join(dir, "missing.yaml")}, "does not exist"},
		{[]string{"--local", "-f", typo}, typo + `: Deployment web: strict decoding error: unknown field "spec.replicaz"`},
	} {
		_, err := runPlan(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plan %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestDeploymentName(t *testing.T) {
	for arg, want := range map[string]string{"deploy/a": "a", "deployment/b": "b", "deployments.apps/c": "c", "d": "d"} {
		if got, err := deploymentName(arg); err != nil || got != want {
			t.Errorf("deploymentName(%q) = %q, %v", arg, got, err)
		}
	}
	for _, arg := range []string{"rs/a", "deploy/", "deploy/a/b"} {
		if _, err := deploymentName(arg); err == nil {
			t.Errorf("deploymentName(%q): no error", arg)
		}
	}
}

// With no kubeconfig anywhere the error says where it looked and what to
// do, instead of client-go's attempt at localhost:8080.
func TestNoKubeconfig(t *testing.T) {
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists on this machine", clientcmd.RecommendedHomeFile)
	}
	t.Setenv("KUBECONFIG", "")
	cmd := NewCommand(Options{DefaultKubeconfig: filepath.Join(t.TempDir(), "kubeconfig")})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"watch", "deploy/x"})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start one with `kubedeploy up` or pass --kubeconfig") {
		t.Errorf("error %v", err)
	}
}

// A plan with a spread (EX-4) gets a SPREAD column, the domains in order, and a line saying what it is.
func TestPrintPlanSpread(t *testing.T) {
	var out bytes.Buffer
	next := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	p := &simulator.Plan{Deployment: "web", Strategy: appsv1.RecreateDeploymentStrategyType, Replicas: 4, NewReplicaSet: "web-1",
		SpreadKey: "topology.kubernetes.io/zone", Complete: true, EstimatedSeconds: 1,
		Steps: []simulator.Step{{NewReplicas: 4, NewReplicaSetExists: true, MaxTotal: 4, Spread: map[string]int{"zone-b": 1, "zone-a": 2, "zone-c": 1}}}}
	if err := printPlan(&out, planReport{next: next, plan: p}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SPREAD zone-a/zone-b/zone-c", "2/1/1", "SPREAD: live pods per topology.kubernetes.io/zone after each step"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
}

// EX-5 in `rollout plan --local`: the steps are listed with their pods and what ends each, the table shows the
// new ReplicaSet at 2 then 5, and the plan ends held at the untimed pause.
func TestPlanLocalRolloutSteps(t *testing.T) {
	dir := t.TempDir()
	v1 := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kubedeploy.io/rollout-steps: |
      - setWeight: 20
      - pause: {duration: 12s}
      - setWeight: 50
      - pause: {}
    kubedeploy.io/rollout-analysis: error-rate
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1"}]}
`
	path := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPlan(t, "--local", "-f", path, "--image", "web=nginx:2", "--pod-startup", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"Rollout steps (kubedeploy.io/rollout-steps):\n" +
			"  1. setWeight 20: 2 pods on the new template, available before the next step\n" +
			"  2. pause 12s: holds at 2 pods\n" +
			"  3. setWeight 50: 5 pods on the new template, available before the next step\n" +
			"  4. pause until promoted: holds at 5 pods until `kubedeploy rollout promote deploy/web`\n" +
			"  then all 10.\n" +
			"Background analysis (kubedeploy.io/rollout-analysis): analysis error-rate from the first step until the rollout completes, " +
			"beside the steps; a failure aborts the rollout, an inconclusive or errored one holds it until `kubedeploy rollout promote deploy/web`.\n",
		"held by rollout step 4 of 4 (pause until promoted): 5 of 10 pods updated after about 16s.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
