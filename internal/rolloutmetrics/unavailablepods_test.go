package rolloutmetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apilabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
)

var scrapeTime = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// unavailableFixture is a collector over hand-filled pod and ReplicaSet indexers. Pods go in through
// podcache.Transform, as in the controllers' shared informers.
type unavailableFixture struct {
	t           testing.TB
	pods        cache.Indexer
	replicaSets cache.Indexer
	synced      bool
	collector   *unavailablePodsCollector
	caches      *podCaches // what collector reads, over pods and replicaSets
	stop        func()     // detaches caches from collector
}

func newUnavailableFixture(t testing.TB) *unavailableFixture {
	f := &unavailableFixture{
		t:           t,
		pods:        cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		replicaSets: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		synced:      true,
		collector:   &unavailablePodsCollector{now: func() time.Time { return scrapeTime }},
	}
	f.caches = &podCaches{
		pods:        corelisters.NewPodLister(f.pods),
		replicaSets: appslisters.NewReplicaSetLister(f.replicaSets),
		synced:      func() bool { return f.synced },
		logger:      klog.Background(),
	}
	f.stop = f.collector.use(f.caches)
	return f
}

// replicaSet adds a ReplicaSet controlled by owner (nil: an orphan) and returns it.
func (f *unavailableFixture) replicaSet(namespace, name string, owner *metav1.OwnerReference, minReadySeconds int32) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name)},
		Spec:       appsv1.ReplicaSetSpec{MinReadySeconds: minReadySeconds},
	}
	if owner != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := f.replicaSets.Add(rs); err != nil {
		f.t.Fatal(err)
	}
	return rs
}

// pod adds a running, scheduled pod controlled by rs, Ready since 10 minutes before scrapeTime, after change.
func (f *unavailableFixture) pod(rs *appsv1.ReplicaSet, name string, change func(*v1.Pod)) {
	truth := true
	long := metav1.NewTime(scrapeTime.Add(-10 * time.Minute))
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, UID: types.UID(rs.Namespace + "/" + name), CreationTimestamp: long,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &truth}}},
		Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &long,
			Conditions:        []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: long}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: long}}}}},
	}
	if change != nil {
		change(p)
	}
	slim, err := podcache.Transform(p)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.pods.Add(slim); err != nil {
		f.t.Fatal(err)
	}
}

// check compares the collector's output with want, lines of the text format without HELP and TYPE.
func (f *unavailableFixture) check(want ...string) {
	f.t.Helper()
	expected := ""
	if len(want) > 0 {
		expected = "# HELP kubedeploy_deployment_unavailable_pods [ALPHA] " + unavailablePodsHelp + "\n" +
			"# TYPE kubedeploy_deployment_unavailable_pods gauge\n" + strings.Join(want, "\n") + "\n"
	}
	// A collector registers once; each comparison registers anew, so it gets its own, over the same caches.
	c := &unavailablePodsCollector{now: f.collector.now}
	for _, caches := range f.collector.caches.All() {
		c.use(caches)
	}
	if err := testutil.CustomCollectAndCompare(c, strings.NewReader(expected), "kubedeploy_deployment_unavailable_pods"); err != nil {
		f.t.Error(err)
	}
}

func deploymentRef(name string) *metav1.OwnerReference {
	truth := true
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: types.UID("deployment-" + name), Controller: &truth}
}

func imagePullBackOff(p *v1.Pod) {
	p.Status.Conditions[1].Status = v1.ConditionFalse
	p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nginx:nope"`}}
}

func notReady(p *v1.Pod) { p.Status.Conditions[1].Status = v1.ConditionFalse }

// TestUnavailablePodsCountsByDeploymentAndReason: issue 11's gauge has one series per namespace, Deployment and
// reason with at least one pod, counts slim cached pods as unavailable.Of classifies full ones, reads each
// ReplicaSet's minReadySeconds, and skips pods that are not a Deployment's through a cached ReplicaSet.
func TestUnavailablePodsCountsByDeploymentAndReason(t *testing.T) {
	f := newUnavailableFixture(t)
	web := f.replicaSet("default", "web-7c5d", deploymentRef("web"), 0)
	f.pod(web, "web-1", imagePullBackOff)
	f.pod(web, "web-2", imagePullBackOff)
	f.pod(web, "web-3", notReady)
	f.pod(web, "web-4", nil)
	f.pod(web, "web-5", nil)
	oldWeb := f.replicaSet("default", "web-55b8", deploymentRef("web"), 0)
	f.pod(oldWeb, "web-old-1", func(p *v1.Pod) { p.DeletionTimestamp = &p.CreationTimestamp })
	slow := f.replicaSet("default", "api-9f8e", deploymentRef("api"), 900)
	f.pod(slow, "api-1", nil) // Ready for 600s of 900
	f.pod(slow, "api-2", func(p *v1.Pod) {
		p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses = "", v1.PodPending, nil
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	})
	// The same names in another namespace are another Deployment.
	other := f.replicaSet("staging", "web-7c5d", deploymentRef("web"), 0)
	f.pod(other, "web-1", imagePullBackOff)

	// Skipped, all of them not available: a ReplicaSet with no owner, one owned by something else, one not in the
	// cache, one recreated under the same name, and pods with no or another kind of owner.
	orphan := f.replicaSet("default", "orphan", nil, 0)
	f.pod(orphan, "orphan-1", notReady)
	rollout := f.replicaSet("default", "canary", &metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "canary",
		UID: "rollout", Controller: ptrTo(true)}, 0)
	f.pod(rollout, "canary-1", notReady)
	fakeDeployment := f.replicaSet("default", "lookalike", &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Deployment", Name: "lookalike",
		UID: "lookalike", Controller: ptrTo(true)}, 0)
	f.pod(fakeDeployment, "lookalike-1", notReady)
	missing := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gone", UID: "gone"}}
	f.pod(missing, "gone-1", imagePullBackOff)
	f.pod(web, "stale-1", func(p *v1.Pod) { notReady(p); p.OwnerReferences[0].UID = "an-earlier-web-7c5d" })
	f.pod(web, "bare-1", func(p *v1.Pod) { notReady(p); p.OwnerReferences = nil })
	f.pod(web, "not-controller-1", func(p *v1.Pod) { notReady(p); p.OwnerReferences[0].Controller = nil })
	f.pod(web, "statefulset-1", func(p *v1.Pod) { notReady(p); p.OwnerReferences[0].Kind = "StatefulSet" })
	f.pod(web, "renamed-1", func(p *v1.Pod) { notReady(p); p.OwnerReferences[0].Name = "web-other" })

	f.check(
		`kubedeploy_deployment_unavailable_pods{deployment="api",namespace="default",reason="MinReadySeconds"} 1`,
		`kubedeploy_deployment_unavailable_pods{deployment="api",namespace="default",reason="Unschedulable"} 1`,
		`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="ImagePullBackOff"} 2`,
		`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="NotReady"} 1`,
		`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="Terminating"} 1`,
		`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="staging",reason="ImagePullBackOff"} 1`,
	)
}

// TestUnavailablePodsOnlyNonZero: available pods make no series, and a series goes once its pods recover.
func TestUnavailablePodsOnlyNonZero(t *testing.T) {
	f := newUnavailableFixture(t)
	web := f.replicaSet("default", "web-7c5d", deploymentRef("web"), 0)
	f.pod(web, "web-1", nil)
	f.pod(web, "web-2", nil)
	f.check()

	f.pod(web, "web-3", imagePullBackOff)
	f.check(`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="ImagePullBackOff"} 1`)
	f.pod(web, "web-3", nil) // pulled and Ready
	f.check()
}

// TestUnavailablePodsNeedsSyncedCaches: nothing is reported before the caches sync, nor once the manager has
// stopped using them (no Deployment controller, a standby, a lost Lease).
func TestUnavailablePodsNeedsSyncedCaches(t *testing.T) {
	f := newUnavailableFixture(t)
	web := f.replicaSet("default", "web-7c5d", deploymentRef("web"), 0)
	f.pod(web, "web-1", imagePullBackOff)
	f.synced = false
	f.check()
	f.synced = true
	f.check(`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="ImagePullBackOff"} 1`)

	f.stop()
	f.check()
}

// TestUnavailablePodsServedOnMetrics: RegisterUnavailablePods puts the process's collector in the legacy registry
// that /metrics serves, and what a controller set gives it is what /metrics shows.
func TestUnavailablePodsServedOnMetrics(t *testing.T) {
	RegisterUnavailablePods()
	f := newUnavailableFixture(t)
	web := f.replicaSet("default", "web-7c5d", deploymentRef("web"), 0)
	f.pod(web, "web-1", imagePullBackOff)
	stop := unavailablePods.use(f.caches)
	defer stop()
	want := "# HELP kubedeploy_deployment_unavailable_pods [ALPHA] " + unavailablePodsHelp + "\n" +
		"# TYPE kubedeploy_deployment_unavailable_pods gauge\n" +
		`kubedeploy_deployment_unavailable_pods{deployment="web",namespace="default",reason="ImagePullBackOff"} 1` + "\n"
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "kubedeploy_deployment_unavailable_pods"); err != nil {
		t.Error(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// BenchmarkUnavailablePodsScrape: one scrape over 10,000 cached pods of 100 Deployments, a tenth of them stuck.
//
//	go test -run xxx -bench UnavailablePodsScrape ./internal/rolloutmetrics/
func BenchmarkUnavailablePodsScrape(b *testing.B) {
	f := newUnavailableFixture(b)
	for d := range 100 {
		rs := f.replicaSet("default", fmt.Sprintf("web%d-7c5d", d), deploymentRef(fmt.Sprintf("web%d", d)), 10)
		for i := range 100 {
			var change func(*v1.Pod)
			if i%10 == 0 {
				change = imagePullBackOff
			}
			f.pod(rs, fmt.Sprintf("web%d-%d", d, i), change)
		}
	}
	caches := f.caches
	b.ResetTimer()
	for range b.N {
		pods, err := caches.pods.List(apilabels.Everything())
		if err != nil {
			b.Fatal(err)
		}
		if n := countUnavailable(pods, caches.replicaSets, scrapeTime); len(n) != 100 {
			b.Fatalf("%d series, want 100", len(n))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/pod")
}
