package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestShardedReplicaKeepsThePodBound is EX-3 (IM-7) under sharded mode (SH-1): one sharded replica over 8
// buckets, Deployments opted into TerminationComplete rolled again every 3 s, and at every pod event no
// namespace holds more live and terminating pods than replicas + maxSurge (6 + 2). Each bucket runs its own
// controllers; before they shared the replica's --concurrent-*-syncs (runner.Slots), a replica ran 8 × 5 syncs
// behind one client rate limiter, decisions landed seconds late, and 9 to 10 pods were seen in 4 runs of 5.
// With three sharded replicas in place of one the bound is still overrun (8 of 12 namespaces at 9-10 pods in
// one run; issue 35's note): that case is not tested here until it is fixed.
func TestShardedReplicaKeepsThePodBound(t *testing.T) {
	ringNS := env.Namespace(t)
	var nss []string
	for range 12 {
		ns := env.Namespace(t)
		nss = append(nss, ns)
		d := harness.NewDeployment(ns, "web", 6, "nginx:1.9")
		d.Annotations = map[string]string{rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
		if _, err := env.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writes := &writeLog{}
	writes.reset()
	startShardMember(t, "solo", ringNS, writes)
	for _, ns := range nss {
		harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	}
	var watches []*harness.PodWatch
	for _, ns := range nss {
		watches = append(watches, harness.WatchPods(t, env.Client, ns, labels.Everything()))
	}
	ctx := context.Background()
	for i := range 10 {
		for _, ns := range nss {
			harness.SetImage(ctx, t, env.Client, ns, "web", "web", fmt.Sprintf("nginx:1.%d", 10+i))
		}
		time.Sleep(3 * time.Second)
	}
	for _, ns := range nss {
		harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	}
	for _, w := range watches {
		if _, _, maxPresent, changes := w.Window(); maxPresent > 8 || changes == 0 {
			t.Errorf("%s: %d pods present at most (want ≤ 6 + maxSurge 2), %d changes seen", w.Namespace(), maxPresent, changes)
		}
	}
}
