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

// TestShardedReplicasKeepThePodBound is EX-3 (IM-7) under sharded mode (SH-1): three sharded replicas over 8
// buckets, 12 Deployments opted into TerminationComplete rolled again every 3 s, and at every pod event no
// namespace holds more live and terminating pods than replicas + maxSurge (6 + 2). Before the Deployment
// controller counted the ReplicaSet controller's pending creations in a ReplicaSet's footprint, 7 of 12
// namespaces reached 9-10 pods this way: it lowered a ReplicaSet whose creates were still in flight and gave
// the new ReplicaSet room those creates then took (issue 35's note).
func TestShardedReplicasKeepThePodBound(t *testing.T) {
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
	for i := range 3 {
		startShardMember(t, fmt.Sprintf("bound-%d", i), ringNS, writes)
	}
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
