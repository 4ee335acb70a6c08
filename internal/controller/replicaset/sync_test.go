package replicaset

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// laggingFixture is a ReplicaSet of want replicas with have pods, all in the
// client and in the cache, the pod cache at resourceVersion 50, after one
// sync: its creates or deletes are in the client, and the cache does not
// show them.
func laggingFixture(t *testing.T, want int32, have int) *fixture {
	t.Helper()
	rs := testRS(want)
	objs := []runtime.Object{rs}
	for i := range have {
		objs = append(objs, newPod(fmt.Sprintf("p%02d", i), ownedBy(rs), webLabels, rv(fmt.Sprint(30+i)), phase(v1.PodRunning)))
	}
	objs = append(objs, newPod("zz-unrelated", rv("50"), withLabels(map[string]string{"app": "db"})))
	f := newFixture(t, objs...)
	if _, err := f.sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	return f
}

// TestSyncLaggingPodCacheNeverOverCreates is issue 7's first finding as a
// fixture (IM-4, kubernetes#129795): 10 → 15 with the pod cache frozen
// after our creates. The guard waits while Behind, then past MaxCacheWait
// and the expectations TTL reads the pods from the API server and creates
// nothing more; it never acts on the stale cache.
func TestSyncLaggingPodCacheNeverOverCreates(t *testing.T) {
	f := laggingFixture(t, 15, 10)
	if got := f.Count("create", "pods", ""); got != 5 {
		t.Fatalf("first sync created %d pods, want 5", got)
	}
	// The pod cache never shows the 5 creates.
	for _, step := range []time.Duration{0, 30 * time.Second, 30 * time.Second} {
		f.Clock.Step(step)
		if _, err := f.sync(); !errors.Is(err, runner.ErrWaiting) {
			t.Fatalf("sync within MaxCacheWait: err = %v, want ErrWaiting", err)
		}
	}
	// Past the cap and past the 5 minute expectations TTL.
	f.Clock.Step(expectations.DefaultTimeout + time.Minute)
	before := len(f.Client.Actions())
	res, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Count("create", "pods", ""); got != 5 {
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
	if got := f.Count("delete", "pods", ""); got != 5 {
		t.Fatalf("first sync deleted %d pods, want 5", got)
	}
	if _, err := f.sync(); !errors.Is(err, runner.ErrWaiting) {
		t.Fatalf("second sync: err = %v, want ErrWaiting while the cache still shows the deleted pods", err)
	}
	f.Clock.Step(expectations.DefaultTimeout + time.Minute)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("delete", "pods", ""); got != 5 {
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
	// Another actor deletes three pods; the cache sees none of it.
	for _, name := range []string{"p00", "p01", "p02"} {
		if err := f.Client.CoreV1().Pods("ns").Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.Clock.Step(2 * expectations.DefaultMaxCacheWait)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("create", "pods", ""); got != 5 {
		t.Fatalf("pods created = %d, want 2 then 3 from the live read", got)
	}
}

// TestSyncCacheCatchesUp: once the cache shows the writes, the record is
// dropped and the sync acts on the cache again (no live reads).
func TestSyncCacheCatchesUp(t *testing.T) {
	f := laggingFixture(t, 12, 10)
	for _, p := range f.pods() { // rs-101 and rs-102 are the creates, in resourceVersion order
		if p.GenerateName != "" {
			f.AddToCache(p.DeepCopy())
			f.c.onPodAdd(klogFor(f), p.DeepCopy())
		}
	}
	if got := f.c.freshness.Check(klogFor(f), "ns/rs"); got != expectations.Fresh {
		t.Fatalf("Check = %v once the cache shows the creates, want Fresh", got)
	}
	before := len(f.Client.Actions())
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if readFromAPI(f, before) {
		t.Error("a caught-up cache must be used, not the API server")
	}
	if got := f.Count("create", "pods", ""); got != 2 {
		t.Fatalf("pods created = %d, want 2", got)
	}
}

// readFromAPI reports whether the actions after the first before ones include
// a get of the ReplicaSet and a list of pods.
func readFromAPI(f *fixture, before int) bool {
	var get, list bool
	for _, a := range f.Client.Actions()[before:] {
		switch {
		case a.GetVerb() == "get" && a.GetResource().Resource == "replicasets":
			get = true
		case a.GetVerb() == "list" && a.GetResource().Resource == "pods":
			list = true
		}
	}
	return get && list
}

// countPrefix returns how many of events start with prefix.
func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// podNames returns the names of pods, comma-separated.
func podNames(pods []v1.Pod) string {
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = pods[i].Name
	}
	return strings.Join(names, ",")
}

// RS-13: from 0 to 3 pods in one sync, with ControllerRef, labels and events.
func TestSyncCreatesPods(t *testing.T) {
	f := newFixture(t, testRS(3))
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectCounts(map[string]int{"create pods": 3, "patch replicasets/status": 1})
	for _, p := range f.pods() {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != "rs-uid" || ref.Kind != "ReplicaSet" || p.Labels["app"] != "web" || p.GenerateName != "rs-" {
			t.Errorf("pod %s: ControllerRef %+v, labels %v, generateName %q", p.Name, ref, p.Labels, p.GenerateName)
		}
	}
	if got := countPrefix(f.Events(), "Normal SuccessfulCreate Created pod: rs-"); got != 3 {
		t.Errorf("SuccessfulCreate events = %d, want 3", got)
	}
	if add, _, _ := f.c.expectations.Pending("ns/rs"); add != 3 {
		t.Errorf("RS-9 expected creations = %d, want 3", add)
	}
	if s := f.rsStatus(); s.ObservedGeneration != 1 || s.Replicas != 0 {
		t.Errorf("status = %+v; want observedGeneration 1, replicas 0 (pods not yet observed)", s)
	}
}

// RS-8/RS-9 and IM-4: a second sync neither creates again while the creations
// are unobserved, nor acts while the pod cache is older than our creates.
func TestSyncExpectationsAndConsistencyBlockRecreate(t *testing.T) {
	// An unrelated pod gives the pod store a known resourceVersion (50).
	f := newFixture(t, testRS(3), newPod("unrelated", rv("50"), withLabels(map[string]string{"app": "db"})))
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// IM-4: the pod cache (RV 50) has not observed our creates (RV 101..103).
	if _, err := f.sync(); !errors.Is(err, runner.ErrCacheBehind) {
		t.Fatalf("second sync err = %v, want ErrCacheBehind", err)
	}
	// The creates reach the cache and the handler observes them (EH-10).
	var pods []*v1.Pod // in creation (resourceVersion) order: rs-101, rs-102, rs-103
	for _, p := range f.pods() {
		if p.Name != "unrelated" {
			pods = append(pods, p.DeepCopy())
		}
	}
	for i, p := range pods {
		f.AddToCache(p)
		if i < 2 {
			f.c.onPodAdd(klogFor(f), p)
		}
	}
	// RS-8: one creation is still unobserved, so no new pods.
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("create", "pods", ""); got != 3 {
		t.Fatalf("pod creates = %d after the blocked sync, want 3", got)
	}
	f.c.onPodAdd(klogFor(f), pods[2])
	if !f.c.expectations.SatisfiedExpectations(klogFor(f), "ns/rs") {
		t.Fatal("expectations must be satisfied after observing all creations")
	}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("create", "pods", ""); got != 3 {
		t.Errorf("pod creates = %d, want 3 in total", got)
	}
}

// RS-14: scale down deletes the unscheduled, then the not-ready pod.
func TestSyncScaleDown(t *testing.T) {
	rs := testRS(1)
	ready := readySince(testNow.Add(-time.Hour))
	f := newFixture(t, rs,
		newPod("ready", ownedBy(rs), webLabels, ready),
		newPod("unready", ownedBy(rs), webLabels),
		newPod("unscheduled", ownedBy(rs), webLabels, onNode(""), phase(v1.PodPending)),
	)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("delete", "pods", ""); got != 2 {
		t.Errorf("pod deletes = %d, want 2", got)
	}
	if names := podNames(f.pods()); names != "ready" {
		t.Errorf("remaining pods = %s, want ready", names)
	}
	if got := countPrefix(f.Events(), "Normal SuccessfulDelete Deleted pod: "); got != 2 {
		t.Errorf("SuccessfulDelete events = %d, want 2", got)
	}
	if _, del, _ := f.c.expectations.Pending("ns/rs"); del != 2 {
		t.Errorf("RS-10 expected deletions = %d, want 2", del)
	}
	// EH-12: observing the deletions (one via tombstone) satisfies the expectations.
	f.c.onPodDelete(klogFor(f), newPod("unready", ownedBy(rs)))
	f.c.onPodDelete(klogFor(f), cache.DeletedFinalStateUnknown{Key: "ns/unscheduled", Obj: newPod("unscheduled", ownedBy(rs))})
	if !f.c.expectations.SatisfiedExpectations(klogFor(f), "ns/rs") {
		t.Error("deletions observed but expectations unsatisfied")
	}
}

// AD-1, AD-3..AD-5: an orphan is adopted, a relabeled pod released.
func TestSyncAdoptsAndReleases(t *testing.T) {
	rs := testRS(1)
	f := newFixture(t, rs,
		newPod("orphan", webLabels),
		newPod("relabeled", ownedBy(rs), withLabels(map[string]string{"app": "other"})),
		newPod("foreign", webLabels, func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "x", UID: "other", Controller: ptr.To(true)}}
		}),
	)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectCounts(map[string]int{
		"patch pods":      2, // adopt + release
		"get replicasets": 1, // AD-3: the uncached GET of the ReplicaSet
		"create pods":     0, // the adopted pod satisfies replicas=1
		"delete pods":     0,
	})
	for _, p := range f.pods() {
		ref := metav1.GetControllerOf(&p)
		switch p.Name {
		case "orphan":
			if ref == nil || ref.UID != "rs-uid" {
				t.Errorf("orphan not adopted: %+v", p.OwnerReferences)
			}
		case "relabeled":
			if len(p.OwnerReferences) != 0 {
				t.Errorf("relabeled pod not released: %+v", p.OwnerReferences)
			}
		case "foreign":
			if ref == nil || ref.UID != "other" {
				t.Errorf("foreign pod touched: %+v", p.OwnerReferences)
			}
		}
	}
	if s := f.rsStatus(); s.Replicas != 1 {
		t.Errorf("status replicas = %d, want 1", s.Replicas)
	}
}

// RS-13, RS-17: a failed create stops slow start, sets ReplicaFailure, records
// FailedCreate and returns the error; unattempted creations are lowered.
func TestSyncFailedCreate(t *testing.T) {
	f := newFixture(t, testRS(5))
	f.Fail("create", "pods", errors.New("exceeded quota"))
	if _, err := f.sync(); err == nil || err.Error() != "exceeded quota" {
		t.Fatalf("sync err = %v, want the create error", err)
	}
	if got := f.Count("create", "pods", ""); got != 1 {
		t.Errorf("pod creates = %d, want 1 (slow start stops after batch 1)", got)
	}
	conds := f.rsStatus().Conditions
	if len(conds) != 1 || conds[0].Type != appsv1.ReplicaSetReplicaFailure || conds[0].Reason != ReasonFailedCreate || conds[0].Message != "exceeded quota" {
		t.Errorf("conditions = %+v, want ReplicaFailure/FailedCreate", conds)
	}
	if got := countPrefix(f.Events(), "Warning FailedCreate Error creating: exceeded quota"); got != 1 {
		t.Errorf("FailedCreate events = %d, want 1", got)
	}
	if !f.c.expectations.SatisfiedExpectations(klogFor(f), "ns/rs") {
		t.Error("RS-9: failed and skipped creations must be lowered")
	}
}

// RS-18: a status-only change costs exactly one write; an unchanged one none.
func TestSyncStatusOnly(t *testing.T) {
	rs := testRS(2)
	ready := readySince(testNow.Add(-time.Hour))
	f := newFixture(t, rs, newPod("a", ownedBy(rs), webLabels, ready), newPod("b", ownedBy(rs), webLabels))
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectWrites(map[string]int{"patch replicasets/status": 1})
	s := f.rsStatus()
	if s.Replicas != 2 || s.ReadyReplicas != 1 || s.AvailableReplicas != 1 || s.FullyLabeledReplicas != 2 || ptr.Deref(s.TerminatingReplicas, -1) != 0 {
		t.Errorf("status = %+v", s)
	}
	written, _ := f.Client.AppsV1().ReplicaSets("ns").Get(f.Ctx, "rs", metav1.GetOptions{})
	f.AddToCache(written)
	f.Client.ClearActions()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectWrites(nil) // an unchanged sync
}

// RS-18: a failed status update is retried once after a GET.
func TestSyncStatusRetry(t *testing.T) {
	f := newFixture(t, testRS(0))
	f.FailEach("patch", "replicasets", func(n int) error { return fmt.Errorf("conflict %d", n) })
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "conflict 2") {
		t.Errorf("err = %v, want the second failure", err)
	}
	f.ExpectCounts(map[string]int{"patch replicasets/status": 2, "get replicasets": 1})
}

// RS-5, RS-7: terminating pods are counted; minReadySeconds wakes the sync
// up with RequeueAfter (IM-5) when a ready pod becomes available.
func TestSyncTerminatingAndMinReadyRequeue(t *testing.T) {
	rs := testRS(1)
	rs.Spec.MinReadySeconds = 10
	terminating := newPod("old", ownedBy(rs), webLabels)
	terminating.DeletionTimestamp = &metav1.Time{Time: testNow}
	f := newFixture(t, rs, newPod("a", ownedBy(rs), webLabels, readySince(testNow.Add(-3*time.Second))), terminating)
	res, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 7*time.Second {
		t.Errorf("RequeueAfter = %v, want 7s", res.RequeueAfter)
	}
	s := f.rsStatus()
	if s.ReadyReplicas != 1 || s.AvailableReplicas != 0 || ptr.Deref(s.TerminatingReplicas, -1) != 1 {
		t.Errorf("status = %+v; want ready 1, available 0, terminating 1", s)
	}
	f.ExpectCounts(map[string]int{"create pods": 0, "delete pods": 0}) // terminating pods are not replicas
}

// Strange objects never crash a sync: invalid selector, nil replicas (VA-2: 1),
// a deleted ReplicaSet (RS-2, RS-11).
func TestSyncStrangeObjects(t *testing.T) {
	t.Run("invalid selector is ignored", func(t *testing.T) {
		rs := testRS(3)
		rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		f := newFixture(t, rs)
		if _, err := f.sync(); err != nil {
			t.Errorf("err = %v, want nil", err)
		}
		f.ExpectWrites(nil)
	})
	t.Run("nil replicas means 1", func(t *testing.T) {
		rs := testRS(0)
		rs.Spec.Replicas = nil
		f := newFixture(t, rs)
		if _, err := f.sync(); err != nil || f.Count("create", "pods", "") != 1 {
			t.Errorf("err = %v, creates = %d; want nil and 1", err, f.Count("create", "pods", ""))
		}
	})
	t.Run("deleted ReplicaSet clears expectations", func(t *testing.T) {
		f := newFixture(t)
		f.c.expectations.ExpectCreations(klogFor(f), "ns/rs", 3)
		f.c.freshness.Written("ns/rs", resourcePods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "999"}})
		if _, err := f.sync(); err != nil {
			t.Fatal(err)
		}
		f.ExpectWrites(nil)
		if _, _, ok := f.c.expectations.Pending("ns/rs"); ok || f.c.freshness.Pending("ns/rs") {
			t.Error("RS-11: expectations and read-your-writes record must be cleared")
		}
	})
	t.Run("template without labels", func(t *testing.T) {
		rs := testRS(1)
		rs.Spec.Template.Labels = nil
		f := newFixture(t, rs)
		if _, err := f.sync(); err == nil || err.Error() != "unable to create pods, no labels" {
			t.Errorf("err = %v", err)
		}
		if f.Count("create", "pods", "") != 0 {
			t.Error("no pod may be created from a template without labels")
		}
	})
}
