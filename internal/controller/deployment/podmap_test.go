package deployment

import (
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
)

// countingIndexer counts the reads of the controller index, the pod map's (SD-4) source.
type countingIndexer struct {
	cache.Indexer
	reads int
}

func (c *countingIndexer) ByIndex(name, key string) ([]any, error) {
	if name == ownership.ControllerIndex {
		c.reads++
	}
	return c.Indexer.ByIndex(name, key)
}

// TestPodMapReadOnlyWhenUsed: a rolling update's sync (no EX-3, no EX-6) decides from ReplicaSet specs and
// statuses alone and reads no pod of its ReplicaSets (issue 48); a Recreate sync waiting for old pods (RC-3)
// reads the pod map, once per ReplicaSet.
func TestPodMapReadOnlyWhenUsed(t *testing.T) {
	s, u := pct25()
	d := newDeployment(10, s, u)
	f := newFixture(t, d, startRollout(d, 13))
	pods := &countingIndexer{Indexer: f.c.podIndexer}
	f.c.podIndexer = pods
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if f.Writes()["create replicasets"] != 1 || pods.reads != 0 {
		t.Errorf("rolling update: writes %v, %d pod map reads; want the new ReplicaSet and none", f.Writes(), pods.reads)
	}

	r := newRecreateDeployment(3)
	old := startRollout(r, 3)
	withStatus(old, 0, 0)
	*old.Spec.Replicas = 0
	f = newFixture(t, r, old)
	pods = &countingIndexer{Indexer: f.c.podIndexer}
	f.c.podIndexer = pods
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if f.Writes()["create replicasets"] != 1 || pods.reads != 1 {
		t.Errorf("Recreate with the old ReplicaSet at 0: writes %v, %d pod map reads; want the new ReplicaSet after one read (RC-3)", f.Writes(), pods.reads)
	}
}
