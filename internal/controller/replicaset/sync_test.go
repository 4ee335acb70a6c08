package replicaset

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// laggingFixture is a ReplicaSet of want replicas with have pods, all in the
// client and in the cache, the pod cache at resourceVersion 50.
func laggingFixture(t *testing.T, want int32, have int) *fixture {
	t.Helper()
	rs := testRS(want)
	objs := []runtime.Object{rs}
	for i := range have {
		objs = append(objs, newPod(fmt.Sprintf("p%02d", i), ownedBy(rs), webLabels, rv(fmt.Sprint(30+i)), phase(v1.PodRunning)))
	}
	objs = append(objs, newPod("zz-unrelated", rv("50"), withLabels(map[string]string{"app": "db"})))
	return newFixture(t, objs...)
}

// TestSyncLaggingPodCacheNeverOverCreates is issue 7's first finding as a
// fixture (IM-4, kubernetes#129795): 10 → 15 with the pod cache frozen
// after our creates. The guard waits while Behind, then past MaxCacheWait
// and the expectations TTL reads the pods from the API server and creates
// nothing more; it never acts on the stale cache.
func TestSyncLaggingPodCacheNeverOverCreates(t *testing.T) {
	f := laggingFixture(t, 15, 10)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.count("create", "pods", ""); got != 5 {
		t.Fatalf("first sync created %d pods, want 5", got)
	}
	// The pod cache never shows the 5 creates.
	for _, step := range []time.Duration{0, 30 * time.Second, 30 * time.Second} {
		f.clock.Step(step)
		if _, err := f.sync(); !errors.Is(err, runner.ErrWaiting) {
			t.Fatalf("sync within MaxCacheWait: err = %v, want ErrWaiting", err)
		}
	}
	// Past the cap and past the 5 minute expectations TTL.
	f.clock.Step(expectations.DefaultTimeout + time.Minute)
	before := len(f.client.Actions())
	res, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.count("create", "pods", ""); got != 5 {
		t.Fatalf("pods created = %d after the caches went stale, want 5 (no over-creation)", got)
	}
	if !readFromAPI(f, before) {
		t.Error("the Stale sync did not read the ReplicaSet and its pods from the API server")
	}
	if s := f.rsStatus(); s.Replicas != 15 {
		t.Errorf("status.replicas = %d, want 15 from the live read", s.Replicas)
	}
	if res.RequeueAfter != expectations.DefaultMaxCacheWait {
		t.Errorf("RequeueAfter = %v, want MaxCacheWait to check again while the cache lags", res.RequeueAfter)
	}
	if !f.c.freshness.Pending("ns/rs") {
		t.Error("the record must stay until the cache shows the writes")
	}
}

// TestSyncLaggingPodCacheNeverOverDeletes: 15 → 10 with the pod cache
// frozen; deletes carry no resourceVersion, so the guard tracks them by UID
// (IM-4). Issue 7 measured 8 live pods here before the guard covered deletes.
func TestSyncLaggingPodCacheNeverOverDeletes(t *testing.T) {
	f := laggingFixture(t, 10, 15)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.count("delete", "pods", ""); got != 5 {
		t.Fatalf("first sync deleted %d pods, want 5", got)
	}
	if _, err := f.sync(); !errors.Is(err, runner.ErrWaiting) {
		t.Fatalf("second sync: err = %v, want ErrWaiting while the cache still shows the deleted pods", err)
	}
	f.clock.Step(expectations.DefaultTimeout + time.Minute)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.count("delete", "pods", ""); got != 5 {
		t.Fatalf("pods deleted = %d after the caches went stale, want 5 (no over-deletion)", got)
	}
	if n := len(f.pods()); n != 11 { // 10 + the unrelated pod
		t.Fatalf("%d pods left, want 10 of the ReplicaSet and 1 unrelated", n)
	}
}

// TestSyncStaleActsOnTheLiveRead: when the live read differs from what the
// controller wrote (someone deleted pods), a Stale sync acts on it.
func TestSyncStaleActsOnTheLiveRead(t *testing.T) {
	f := laggingFixture(t, 12, 10)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// Another actor deletes three pods; the cache sees none of it.
	for _, name := range []string{"p00", "p01", "p02"} {
		if err := f.client.CoreV1().Pods("ns").Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Step(2 * expectations.DefaultMaxCacheWait)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.count("create", "pods", ""); got != 5 {
		t.Fatalf("pods created = %d, want 2 then 3 from the live read", got)
	}
}

// TestSyncCacheCatchesUp: once the cache shows the writes, the record is
// dropped and the sync acts on the cache again (no live reads).
func TestSyncCacheCatchesUp(t *testing.T) {
	f := laggingFixture(t, 12, 10)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	for _, p := range f.pods() { // rs-101 and rs-102 are the creates, in resourceVersion order
		if p.GenerateName != "" {
			f.addToCache(p.DeepCopy())
			f.c.onPodAdd(klogFor(f), p.DeepCopy())
		}
	}
	if got := f.c.freshness.Check(klogFor(f), "ns/rs"); got != expectations.Fresh {
		t.Fatalf("Check = %v once the cache shows the creates, want Fresh", got)
	}
	before := len(f.client.Actions())
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if readFromAPI(f, before) {
		t.Error("a caught-up cache must be used, not the API server")
	}
	if got := f.count("create", "pods", ""); got != 2 {
		t.Fatalf("pods created = %d, want 2", got)
	}
}

// readFromAPI reports whether the actions after the first before ones include
// a get of the ReplicaSet and a list of pods.
func readFromAPI(f *fixture, before int) bool {
	var get, list bool
	for _, a := range f.client.Actions()[before:] {
		switch {
		case a.GetVerb() == "get" && a.GetResource().Resource == "replicasets":
			get = true
		case a.GetVerb() == "list" && a.GetResource().Resource == "pods":
			list = true
		}
	}
	return get && list
}
