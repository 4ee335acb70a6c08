package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// TestSyncRequeueStuckST16: a full rolling sync that writes nothing returns
// RequeueAfter = lastUpdateTime + progressDeadlineSeconds - now + 1s.
func TestSyncRequeueStuckST16(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2"}
	old := withStatus(newRS(d, "old", "nginx:old", 2, 0, sizeAnnotations(2, 3, 1)), 2, 2)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 1, 1, sizeAnnotations(2, 3, 2)), 1, 0)
	f := newFixture(t, d, old, cur)
	// First sync: settle status and conditions.
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.observe()
	p := rolloutstate.Condition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if p == nil || p.Status != v1.ConditionTrue {
		t.Fatalf("Progressing after first sync = %+v", p)
	}
	f.Clock.Step(100 * time.Second)
	res, err := f.sync()
	if err != nil {
		t.Fatalf("second sync: %v", err)
	}
	f.ExpectWrites(map[string]int{})
	want := p.LastUpdateTime.Add(600*time.Second).Sub(f.Clock.Now()) + time.Second
	if res.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, want)
	}
}
