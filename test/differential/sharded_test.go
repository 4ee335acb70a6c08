package differential

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// TestOursRunsSharded proves a KUBEDEPLOY_DIFF_SHARDED=N run compared upstream with N sharded replicas (SH-1),
// not one manager: our cluster's ring has every bucket owned, by N replicas.
func TestOursRunsSharded(t *testing.T) {
	replicas, _ := strconv.Atoi(os.Getenv(shardedEnv))
	if replicas < 1 || ours == nil {
		t.Skip(shardedEnv + " is not set: our side runs one manager")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var owners map[string]bool
	for ctx.Err() == nil {
		cm, err := ours.client.CoreV1().ConfigMaps(manager.DefaultResourceNamespace).Get(ctx, shard.DefaultRingName, metav1.GetOptions{})
		if err == nil {
			if ring, err := shard.DecodeRing(cm); err == nil {
				owners = map[string]bool{}
				for _, b := range ring.Buckets {
					owners[b.Owner] = b.Owner != ""
				}
				if len(owners) == replicas && !hasFalse(owners) {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the ring of our cluster is not owned by %d replicas: owners %v", replicas, owners)
}

func hasFalse(m map[string]bool) bool {
	for _, v := range m {
		if !v {
			return true
		}
	}
	return false
}
