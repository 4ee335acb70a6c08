package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// RolloutPlan runs `kubedeploy rollout plan deploy/NAME -n NS -o json
// --kubeconfig KUBECONFIG ARGS…` as a user would and returns the decoded
// plan; it fails t if the command fails or its output does not decode.
func RolloutPlan(ctx context.Context, t *testing.T, kubeconfig, ns, name string, args ...string) simulator.Plan {
	t.Helper()
	cmd := rollout.NewCommand(rollout.Options{})
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"plan", "deploy/" + name, "-n", ns, "-o", "json", "--kubeconfig", kubeconfig}, args...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("rollout plan: %v\n%s", err, errOut.String())
	}
	var p simulator.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("rollout plan -o json: %v\n%s", err, out.String())
	}
	return p
}
