package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// Issue 44, item 2 (EX-1, VD-1): `rollout watch --plain` of a rollout that reaches its partition ends with a
// verdict that names as unavailable only pods its ReplicaSets lack. docs/policies.md's EX-1 steps, 20 times: a
// 20-replica Deployment with kubedeploy.io/rollout-partition: "5" gets a new image and is watched to the end; the
// last block's ReplicaSet lines are summed and the "N pods kept on the old template are unavailable" of its verdict
// line must be 20 minus that sum (0 when it names none). Before the verdict judged one snapshot, the watch ended 4
// of 4 times with "5 pods kept on the old template are unavailable" and every ReplicaSet's pods available.
func TestWatchHeldVerdictMatchesItsReplicaSets(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 15*time.Minute)
	d := harness.NewDeployment(ns, "held", 20, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: "5"}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "held", rolloutTimeout)
	for i := range 20 {
		setImage(ctx, t, ns, "held", "held", fmt.Sprintf("nginx:1.%d", 10+i))
		out, err := runRollout(ctx, ns, "watch", "deploy/held", "--plain", "--timeout", "2m")
		if err != nil {
			t.Fatalf("run %d: rollout watch: %v\n%s", i, err, out)
		}
		kept, available, err := heldBlock(out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if kept != 20-available {
			t.Errorf("run %d: the verdict names %d pods kept back unavailable; its ReplicaSets have %d of 20 available:\n%s", i, kept, available, lastBlock(out))
		}
	}
}

var (
	heldLine      = regexp.MustCompile(`(?m)^  rollout held by kubedeploy\.io/rollout-partition: 5 of 20 pods updated(?:; (\d+) pods? kept on the old template (?:is|are) unavailable)?$`)
	replicaSetRow = regexp.MustCompile(`(?m)^  (?:new|old) \S+: \d+ desired, \d+ ready, (\d+) available$`)
)

// heldBlock reads the last block of a plain `rollout watch` that ended held: how many pods its verdict line says
// are kept back unavailable, and the available pods its ReplicaSet lines add up to.
func heldBlock(out string) (kept, available int, err error) {
	block := lastBlock(out)
	m := heldLine.FindStringSubmatch(block)
	if m == nil {
		return 0, 0, fmt.Errorf("the last block has no held verdict")
	}
	if m[1] != "" {
		kept, _ = strconv.Atoi(m[1])
	}
	rows := replicaSetRow.FindAllStringSubmatch(block, -1)
	if len(rows) == 0 {
		return 0, 0, fmt.Errorf("the last block has no ReplicaSet line")
	}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		available += n
	}
	return kept, available, nil
}

// lastBlock returns the last block of a plain `rollout watch`: from its last "deployment/…" line on.
func lastBlock(out string) string {
	if i := strings.LastIndex(out, " deployment/"); i >= 0 {
		if j := strings.LastIndex(out[:i], "\n"); j >= 0 {
			return out[j+1:]
		}
	}
	return out
}
