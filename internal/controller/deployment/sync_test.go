package deployment

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// syncedOnce returns a fixture over a new Deployment of 3 replicas (maxSurge
// and maxUnavailable 25%) with optimistic concurrency enforced, after its
// first sync (its ReplicaSet created and its status written, which the
// caches do not show yet), and the count of self-inflicted conflicts.
func syncedOnce(t *testing.T) (*fixture, *int) {
	t.Helper()
	s, u := pct25()
	f := newFixture(t, newDeployment(3, s, u))
	conflicts := f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	return f, conflicts
}

// TestSyncNewDeployment: a new Deployment gets its first ReplicaSet
// (RV-9, OM-10..OM-12, OM-21, OM-24, RV-13) and a status write.
func TestSyncNewDeployment(t *testing.T) {
	s, u := pct25()
	d := newDeployment(3, s, u)
	d.Annotations = map[string]string{"custom": "yes", rolloutstate.LastAppliedConfigAnnotation: "{}"}
	f := newFixture(t, d)
	conflicts := f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.ExpectWrites(map[string]int{"create replicasets": 1, "update deployments/status": 2})
	if *conflicts != 0 {
		t.Errorf("IM-2: %d self-inflicted conflicts", *conflicts)
	}
	rss := f.replicaSets()
	if len(rss) != 1 {
		t.Fatalf("got %d replica sets", len(rss))
	}
	rs := rss[0]
	hash := computeHash(&d.Spec.Template, nil)
	if rs.Name != "nginx-"+hash {
		t.Errorf("name = %q, want nginx-%s", rs.Name, hash)
	}
	for where, labels := range map[string]map[string]string{
		"labels": rs.Labels, "selector": rs.Spec.Selector.MatchLabels, "template": rs.Spec.Template.Labels,
	} {
		if labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || labels["app"] != "nginx" {
			t.Errorf("%s = %v, want app=nginx and hash %s", where, labels, hash)
		}
	}
	if *rs.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *rs.Spec.Replicas)
	}
	wantAnn := map[string]string{rolloutstate.RevisionAnnotation: "1", rolloutstate.DesiredReplicasAnnotation: "3", rolloutstate.MaxReplicasAnnotation: "4", "custom": "yes"}
	if !reflect.DeepEqual(rs.Annotations, wantAnn) {
		t.Errorf("annotations = %v, want %v", rs.Annotations, wantAnn)
	}
	ref := metav1.GetControllerOf(&rs)
	if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !*ref.BlockOwnerDeletion {
		t.Errorf("ControllerRef = %+v", ref)
	}
	if got, want := f.Events(), []string{"Normal ScalingReplicaSet Scaled up replica set nginx-" + hash + " from 0 to 3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	got := f.deployment()
	if got.Annotations[rolloutstate.RevisionAnnotation] != "1" {
		t.Errorf("deployment revision = %q", got.Annotations[rolloutstate.RevisionAnnotation])
	}
	p := rolloutstate.Condition(&got.Status, appsv1.DeploymentProgressing)
	if p == nil || p.Reason != NewReplicaSetCreated || p.Message != `Created new replica set "nginx-`+hash+`"` || p.Status != v1.ConditionTrue {
		t.Errorf("Progressing = %+v", p)
	}
	a := rolloutstate.Condition(&got.Status, appsv1.DeploymentAvailable)
	if a == nil || a.Reason != MinimumReplicasUnavailable || got.Status.ObservedGeneration != 1 {
		t.Errorf("Available = %+v, observedGeneration %d", a, got.Status.ObservedGeneration)
	}
}

// TestSyncRollingUpdateTraceRU16 drives the RU-16 worked trace.
func TestSyncRollingUpdateTraceRU16(t *testing.T) {
	s, u := pct25()
	d := newDeployment(10, s, u)
	a := startRollout(d, 13)
	f := newFixture(t, d, a)
	f.enforceOptimisticConcurrency()

	// Sync 1: create B at 3, scale A 10 -> 8.
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync 1: %v", err)
	}
	f.ExpectWrites(map[string]int{"create replicasets": 1, "patch replicasets": 1, "update deployments/status": 2})
	b := "nginx-" + computeHash(&d.Spec.Template, nil)
	checkRU16Sync1(t, f, b)

	// Sync 2: A reports 8 available, B 0 available: B 3 -> 5.
	f.setRSStatus("nginx-a", 8, 8)
	f.setRSStatus(b, 3, 0)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync 2: %v", err)
	}
	if got := f.Writes()["patch replicasets"]; got != 1 {
		t.Errorf("sync 2: %d replica set updates, want 1", got)
	}
	if got := *f.rs(b).Spec.Replicas; got != 5 {
		t.Errorf("sync 2: B = %d, want 5", got)
	}
	if got := *f.rs("nginx-a").Spec.Replicas; got != 8 {
		t.Errorf("sync 2: A = %d, want 8", got)
	}

	// Sync 3: B still 0 available: nothing but status.
	f.setRSStatus(b, 5, 0)
	f.Events()
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync 3: %v", err)
	}
	w := f.Writes()
	if w["patch replicasets"] != 0 || w["create replicasets"] != 0 {
		t.Errorf("sync 3 wrote replica sets: %v", w)
	}
	if got := f.deployment().Status; got.Replicas != 13 || got.UpdatedReplicas != 5 || got.AvailableReplicas != 8 || got.UnavailableReplicas != 5 {
		t.Errorf("sync 3 status = %+v", got)
	}

	// Once B is available, A is scaled down further.
	f.setRSStatus(b, 5, 5)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync 4: %v", err)
	}
	if got := *f.rs("nginx-a").Spec.Replicas; got != 3 {
		t.Errorf("sync 4: A = %d, want 3 (13 available - 8 min = 5 scaled down)", got)
	}
}

// checkRU16Sync1 checks the state after sync 1 of the RU-16 trace: new
// ReplicaSet b created at 3 with revision 2, A scaled 10 -> 8, and the two
// ScalingReplicaSet events in that order.
func checkRU16Sync1(t *testing.T, f *fixture, b string) {
	t.Helper()
	if got := *f.rs(b).Spec.Replicas; got != 3 {
		t.Errorf("sync 1: B = %d, want 3", got)
	}
	if got := *f.rs("nginx-a").Spec.Replicas; got != 8 {
		t.Errorf("sync 1: A = %d, want 8", got)
	}
	if f.rs(b).Annotations[rolloutstate.RevisionAnnotation] != "2" {
		t.Errorf("B revision = %q, want 2", f.rs(b).Annotations[rolloutstate.RevisionAnnotation])
	}
	wantEvents := []string{
		"Normal ScalingReplicaSet Scaled up replica set " + b + " from 0 to 3",
		"Normal ScalingReplicaSet Scaled down replica set nginx-a from 10 to 8",
	}
	if got := f.Events(); !reflect.DeepEqual(got, wantEvents) {
		t.Errorf("sync 1 events = %q, want %q", got, wantEvents)
	}
}

// TestSyncScalingEventOneActiveRS: SD-9/SD-12 with PS-1.
func TestSyncScalingEventOneActiveRS(t *testing.T) {
	s, u := pct25()
	d := newDeployment(5, s, u)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "1"}
	progressing := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, rolloutstate.NewReplicaSetAvailable, "done", baseTime)
	d.Status.Conditions = []appsv1.DeploymentCondition{progressing}
	rs := withStatus(newRS(d, "nginx-a", "nginx:1.14.2", 3, 0, sizeAnnotations(3, 4, 1)), 3, 3)
	f := newFixture(t, d, rs)
	if !isScalingEvent(d, []*appsv1.ReplicaSet{rs}) {
		t.Fatal("isScalingEvent = false")
	}
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.ExpectWrites(map[string]int{"patch replicasets": 1, "update deployments/status": 1})
	got := f.rs("nginx-a")
	if *got.Spec.Replicas != 5 || got.Annotations[rolloutstate.DesiredReplicasAnnotation] != "5" || got.Annotations[rolloutstate.MaxReplicasAnnotation] != "7" {
		t.Errorf("RS = %d replicas, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
	if ev := f.Events(); len(ev) != 1 || ev[0] != "Normal ScalingReplicaSet Scaled up replica set nginx-a from 3 to 5" {
		t.Errorf("events = %q", ev)
	}
	// The status sync is plain (ST-5): Progressing is carried over unchanged.
	if p := rolloutstate.Condition(&f.deployment().Status, appsv1.DeploymentProgressing); p == nil || *p != progressing {
		t.Errorf("Progressing = %+v, want %+v", p, progressing)
	}
}

// TestSyncDeletedAndMissing: SD-1 NotFound is success; SD-5 deleting
// Deployment writes only status and never creates.
func TestSyncDeletedAndMissing(t *testing.T) {
	f := newFixture(t)
	if _, err := f.sync(); err != nil {
		t.Fatalf("missing deployment: %v", err)
	}
	f.ExpectWrites(map[string]int{})

	s, u := pct25()
	d := newDeployment(3, s, u)
	now := metav1.NewTime(baseTime)
	d.DeletionTimestamp = &now
	f = newFixture(t, d)
	if _, err := f.sync(); err != nil {
		t.Fatalf("deleting deployment: %v", err)
	}
	f.ExpectWrites(map[string]int{"update deployments/status": 1})
}

// TestSyncSelectingAll: SD-2.
func TestSyncSelectingAll(t *testing.T) {
	s, u := pct25()
	d := newDeployment(3, s, u)
	d.Spec.Selector = &metav1.LabelSelector{}
	f := newFixture(t, d)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectWrites(map[string]int{"update deployments/status": 1})
	if ev := f.Events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning SelectingAll "+selectingAllMessage) {
		t.Errorf("events = %q", ev)
	}
}

// TestSyncAdoptionContinuesFromPatchedObject is issue 7's second finding
// (IM-2): an orphan ReplicaSet with the Deployment's template is adopted and
// then updated (revision and size annotations, RV-2) in the same sync; the
// update must carry the adopted object's resourceVersion, not the cache's.
func TestSyncAdoptionContinuesFromPatchedObject(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := withStatus(newRS(d, "nginx-"+computeHash(&d.Spec.Template, nil), "nginx:1.14.2", 3, 0, nil), 3, 3)
	orphan.OwnerReferences = nil
	f := newFixture(t, d, orphan)
	conflicts := f.enforceOptimisticConcurrency()
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if *conflicts != 0 {
		t.Fatalf("IM-2: %d self-inflicted conflicts after adoption", *conflicts)
	}
	w := f.Writes()
	if w["patch replicasets"] != 2 {
		t.Fatalf("writes = %v, want the adopt patch then the RV-2 patch", w)
	}
	rs := f.rs(orphan.Name)
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || rs.Annotations[rolloutstate.RevisionAnnotation] != "1" {
		t.Errorf("adopted ReplicaSet: ControllerRef %+v, annotations %v", ref, rs.Annotations)
	}
}

// TestSyncWaitsForItsOwnDeploymentWrites (IM-4): after writing the
// Deployment's status, a sync whose Deployment cache does not show that
// write yet waits instead of writing again from the stale copy (which would
// be a self-inflicted 409); once the cache shows it, the sync proceeds.
func TestSyncWaitsForItsOwnDeploymentWrites(t *testing.T) {
	f, conflicts := syncedOnce(t)
	if _, err := f.sync(); !errors.Is(err, runner.ErrWaiting) {
		t.Fatalf("second sync err = %v, want ErrWaiting while the cache is behind our status write", err)
	}
	f.ExpectWrites(map[string]int{})
	f.observe()
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync after the cache caught up: %v", err)
	}
	if *conflicts != 0 {
		t.Errorf("%d self-inflicted conflicts", *conflicts)
	}
}

// TestSyncStaleCacheReadsFromTheAPIServer (IM-4): when the caches stay
// behind our writes for longer than MaxCacheWait, the sync reads the
// Deployment and the ReplicaSets from the API server and acts on them: it
// sees the ReplicaSet it created (the cache does not) and creates no second
// one, and it asks to be synced again after MaxCacheWait.
func TestSyncStaleCacheReadsFromTheAPIServer(t *testing.T) {
	f, conflicts := syncedOnce(t)
	f.Clock.Step(expectations.DefaultMaxCacheWait + time.Second)
	res, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	var gotD, listedRS bool
	for _, a := range f.Client.Actions() {
		gotD = gotD || (a.GetVerb() == "get" && a.GetResource().Resource == "deployments")
		listedRS = listedRS || (a.GetVerb() == "list" && a.GetResource().Resource == "replicasets")
	}
	if !gotD || !listedRS {
		t.Errorf("Stale sync: get deployment %v, list replicasets %v; want both from the API server", gotD, listedRS)
	}
	if w := f.Writes(); w["create replicasets"] != 0 {
		t.Fatalf("writes = %v: a second ReplicaSet for the same template", w)
	}
	if n := len(f.replicaSets()); n != 1 || *conflicts != 0 {
		t.Fatalf("%d ReplicaSets, %d conflicts; want 1 and 0", n, *conflicts)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > expectations.DefaultMaxCacheWait {
		t.Errorf("RequeueAfter = %v, want (0, MaxCacheWait]", res.RequeueAfter)
	}
}

// TestSyncClaimAdoptsAndReleases (SD-3, AD-1..AD-5): a matching orphan is
// adopted and an owned ReplicaSet whose labels no longer match is released,
// one patch each, before anything else.
func TestSyncClaimAdoptsAndReleases(t *testing.T) {
	s, u := pct25()
	d := newDeployment(2, s, u)
	cur := withStatus(newRS(d, "cur", "nginx:1.14.2", 2, 1, sizeAnnotations(2, 3, 2)), 2, 2)
	orphan := withStatus(newRS(d, "orphan", "nginx:old", 0, 0, sizeAnnotations(2, 3, 1)), 0, 0)
	orphan.OwnerReferences = nil
	strayed := withStatus(newRS(d, "strayed", "nginx:older", 0, 0, nil), 0, 0)
	strayed.Labels = map[string]string{"app": "elsewhere"}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	f := newFixture(t, d, cur, orphan, strayed)
	if _, err := f.sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	patches := 0
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "replicasets" {
			patches++
			name := a.(interface{ GetName() string }).GetName()
			if name != "orphan" && name != "strayed" {
				t.Errorf("patched %s", name)
			}
		}
	}
	if patches != 2 {
		t.Errorf("%d ReplicaSet patches, want 2 (adopt orphan, release strayed)", patches)
	}
	if ref := metav1.GetControllerOf(f.rs("orphan")); ref == nil || ref.UID != d.UID {
		t.Errorf("orphan not adopted: %v", ref)
	}
}

// TestSyncUnknownStrategySD10: an unknown strategy type is an error naming it.
func TestSyncUnknownStrategySD10(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
	f := newFixture(t, d)
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "unexpected deployment strategy type: BlueGreen") {
		t.Fatalf("err = %v", err)
	}
	if w := f.Writes(); w["create replicasets"] != 0 {
		t.Errorf("writes %v: nothing may be created for an unknown strategy", w)
	}
}

// TestSyncAdoptionFailureStopsSD3: a failed adoption is returned and nothing
// else happens in that sync (SD-3).
func TestSyncAdoptionFailureStopsSD3(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := newRS(d, "orphan", "nginx:1", 1, 0, nil)
	orphan.OwnerReferences = nil
	f := newFixture(t, d, orphan)
	f.Fail("patch", "replicasets", errQuota)
	if _, err := f.sync(); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("err = %v, want the adoption error", err)
	}
	f.ExpectWrites(map[string]int{"patch replicasets": 1})
}

// TestSyncRefusesUnsupportedDeploymentField (IM-8): a Deployment whose stored JSON has a spec field kubedeploy's API
// does not know (outside the pod template) gets the Warning event UnsupportedDeploymentField naming it and no write
// at all, not even observedGeneration; once its generation changes and the store has not seen it yet, the sync is
// retried (ErrStale), never run on what it cannot know.
func TestSyncRefusesUnsupportedDeploymentField(t *testing.T) {
	s, u := pct25()
	d := newDeployment(3, s, u)
	f := newFixture(t, d)
	templates := rawtemplate.NewStore(klog.Background(), nil)
	f.c.templates = templates
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	raw := &unstructured.Unstructured{Object: obj}
	raw.SetAPIVersion("apps/v1")
	raw.SetKind("Deployment")
	if err := unstructured.SetNestedField(raw.Object, "Exact", "spec", "podReplacementPolicyV2"); err != nil {
		t.Fatal(err)
	}
	if _, err := templates.Note(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.ExpectWrites(map[string]int{})
	if ev := f.Events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+UnsupportedDeploymentField) || !strings.Contains(ev[0], "spec.podReplacementPolicyV2") {
		t.Errorf("events = %q", ev)
	}

	raw.SetGeneration(d.Generation + 1)
	if _, err := templates.Note(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sync(); !errors.Is(err, rawtemplate.ErrStale) {
		t.Errorf("sync of a generation older than the store's: err %v, want ErrStale", err)
	}
	f.ExpectWrites(map[string]int{})
}
