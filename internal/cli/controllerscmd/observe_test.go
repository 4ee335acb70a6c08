package controllerscmd

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shadow"
)

// observe --once's report says what it covered, lists each divergent Deployment's writes, the Deployments it
// could not check and the verdict of every rollout not complete; a clean report says so in its first line.
func TestPrintOnce(t *testing.T) {
	var b strings.Builder
	printOnce(&b, manager.OnceReport{
		Checked: 3,
		Divergent: []shadow.Report{{Deployment: cache.ObjectName{Namespace: "shop", Name: "web"}, Settled: true, Divergences: []shadow.Divergence{
			{Kind: shadow.KindScale, Object: "ReplicaSet shop/web-1", Field: "spec.replicas", Live: "4", Kubedeploy: "2", Count: 1},
		}}},
		Unsettled: []string{"shop/api: the rollout is progressing: 2 of 4 pods updated, 3 available"},
		Rollouts: []string{"shop/api: progressing: 2 of 4 pods updated, 3 available",
			"shop/canary: held by kubedeploy.io/rollout-partition: 2 of 4 pods updated"},
	}, "shop")
	want := `Shadow check of namespace shop: 3 Deployments, 2 settled, 1 would get writes from kubedeploy.

If you switched to kubedeploy now, these are the writes it would make:
  Deployment shop/web
    scale: ReplicaSet shop/web-1 spec.replicas: live 4, kubedeploy 2

Not settled (rollouts in progress), so not checked:
  shop/api: the rollout is progressing: 2 of 4 pods updated, 3 available

Rollouts not complete (the verdict kubedeploy's conditions, rollout plan and rollout watch give):
  shop/api: progressing: 2 of 4 pods updated, 3 available
  shop/canary: held by kubedeploy.io/rollout-partition: 2 of 4 pods updated
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printOnce(&b, manager.OnceReport{Checked: 2}, "")
	if got := b.String(); got != "Shadow check of the cluster: 2 Deployments, 2 settled, 0 would get writes from kubedeploy.\n" {
		t.Errorf("clean report: %q", got)
	}
}

// --namespace without --once is refused: observe mode follows every namespace.
func TestObserveNamespaceNeedsOnce(t *testing.T) {
	cmd := NewObserveCommand()
	cmd.SetArgs([]string{"--namespace", "shop"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--once") {
		t.Errorf("observe -n without --once: err %v, want one naming --once", err)
	}
}

// TestObserveFlagRanges: observe refuses each numeric flag outside its range before it reads any kubeconfig, with
// one line naming the flag (not secure-port, which is `controllers`' flag) and the range (issue 33).
func TestObserveFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--port=-1"}, "--port must be in 0..65535, got -1"},
		{[]string{"--port=70000"}, "--port must be in 0..65535, got 70000"},
		{[]string{"--shadow-quiet=-1s"}, "--shadow-quiet must be greater than 0, got -1s"},
		{[]string{"--shadow-quiet=0", "--once"}, "--shadow-quiet must be greater than 0, got 0s"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps must be greater than 0, got 0"},
		{[]string{"--kube-api-burst=-1"}, "--kube-api-burst must be at least 1, got -1"},
		{[]string{"--log-flush-frequency=-5s"}, "--log-flush-frequency must be greater than 0, got -5s"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := NewObserveCommand()
			cmd.SetArgs(append(tc.args, "--kubeconfig=/nonexistent/kubeconfig"))
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			if err := cmd.Execute(); err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
