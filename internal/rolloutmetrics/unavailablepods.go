package rolloutmetrics

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apilabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// unavailablePodsDesc is kubedeploy_deployment_unavailable_pods (issue 11, "why stuck" in metrics): a gauge, in
// pods, of a Deployment's pods that are not available. Labels: namespace (the pods' and the Deployment's),
// deployment (the Deployment's name, from the ControllerRef of the pods' ReplicaSet), reason (unavailable.Of's,
// as `kubedeploy rollout watch` shows it: Terminating, Failed, Unschedulable, Pending, a container's waiting
// reason such as ImagePullBackOff or CrashLoopBackOff, a non-zero exit's reason such as Error or OOMKilled,
// NotReady, MinReadySeconds). Pods of every ReplicaSet of the Deployment count, old ones too. Only non-zero
// series exist: a series goes away once no pod of the Deployment has its reason.
var unavailablePodsDesc = metrics.NewDesc("kubedeploy_deployment_unavailable_pods", unavailablePodsHelp,
	[]string{"namespace", "deployment", "reason"}, nil, metrics.ALPHA, "")

const unavailablePodsHelp = "Number of a Deployment's pods that are not available, by namespace, Deployment name and reason " +
	"(as kubedeploy rollout watch gives it: ImagePullBackOff, CrashLoopBackOff, Unschedulable, NotReady, MinReadySeconds, " +
	"Terminating, ...); only reasons with at least one pod have a series."

// unavailablePods is the process's kubedeploy_deployment_unavailable_pods collector, registered by
// RegisterUnavailablePods; UseUnavailablePods attaches sets of shared informers to it (each Deployment
// controller's, or observe mode's).
var (
	unavailablePods         = &unavailablePodsCollector{now: time.Now}
	registerUnavailableOnce sync.Once
)

// RegisterUnavailablePods registers kubedeploy_deployment_unavailable_pods (issue 11) in the legacy registry,
// once per process; it reports nothing until UseUnavailablePods gives it caches.
func RegisterUnavailablePods() {
	registerUnavailableOnce.Do(func() { legacyregistry.CustomMustRegister(unavailablePods) })
}

// UseUnavailablePods makes kubedeploy_deployment_unavailable_pods read factory's pod and ReplicaSet caches
// (asking factory for those informers, so call it before the factory starts) from the next scrape on, until
// stop is called, beside the caches of other factories in use (one per controller set; in sharded mode a
// process runs several, over disjoint namespaces). A series two factories both report is taken from the one
// added first (Attached). stop removes factory's caches only; calling it again is harmless.
func UseUnavailablePods(factory informers.SharedInformerFactory, logger klog.Logger) (stop func()) {
	return unavailablePods.use(sharedPodCaches(factory, logger))
}

// unavailablePodsCollector collects kubedeploy_deployment_unavailable_pods (issue 11) at scrape time from the
// controllers' shared informer caches, so it costs no API request and no memory between scrapes. A scrape
// is O(pods): it lists every cached pod, looks up each distinct owning ReplicaSet once and runs
// unavailable.Of on each pod (about 2 ms for 10,000 pods on 2 cores, BenchmarkUnavailablePodsScrape). With no
// caches (no Deployment controller running, a standby under leader election) or caches not synced yet it
// reports nothing; with several, it reports the union of those synced.
type unavailablePodsCollector struct {
	metrics.BaseStableCollector

	// now is the clock unavailable.Of is given (MinReadySeconds); a test seam.
	now    func() time.Time
	caches Attached[podCaches]
}

// podCaches is what the collector reads: the shared informers' pods (slimmed by podcache.Transform, which
// keeps what unavailable.Of reads for a reason) and ReplicaSets.
type podCaches struct {
	pods        corelisters.PodLister
	replicaSets appslisters.ReplicaSetLister
	// synced reports whether both informers have synced.
	synced func() bool
	logger klog.Logger
}

// use makes the collector read caches, beside those it reads already, from the next scrape on until stop is
// called; stop removes caches only and is harmless to call again.
func (c *unavailablePodsCollector) use(caches *podCaches) (stop func()) {
	return c.caches.Add(caches)
}

// sharedPodCaches returns the pod and ReplicaSet caches of factory.
func sharedPodCaches(factory informers.SharedInformerFactory, logger klog.Logger) *podCaches {
	pods, replicaSets := factory.Core().V1().Pods(), factory.Apps().V1().ReplicaSets()
	return &podCaches{
		pods:        pods.Lister(),
		replicaSets: replicaSets.Lister(),
		synced:      func() bool { return pods.Informer().HasSynced() && replicaSets.Informer().HasSynced() },
		logger:      logger,
	}
}

// DescribeWithStability sends kubedeploy_deployment_unavailable_pods's one descriptor.
func (c *unavailablePodsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- unavailablePodsDesc
}

// CollectWithStability sends one gauge per (namespace, Deployment, reason) with at least one pod, in the
// synced caches in use; a series is taken from the first caches that have it.
func (c *unavailablePodsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	now := c.now()
	counts := map[unavailableSeries]int{}
	for _, caches := range c.caches.All() {
		for s, n := range caches.countUnavailable(now) {
			if _, sent := counts[s]; !sent {
				counts[s] = n
			}
		}
	}
	for s, n := range counts {
		ch <- metrics.NewLazyConstMetric(unavailablePodsDesc, metrics.GaugeValue, float64(n), s.namespace, s.deployment, s.reason)
	}
}

// countUnavailable returns countUnavailable of the cached pods at now, or nil when the caches have not synced
// or cannot be listed (logged).
func (p *podCaches) countUnavailable(now time.Time) map[unavailableSeries]int {
	if !p.synced() {
		return nil
	}
	pods, err := p.pods.List(apilabels.Everything())
	if err != nil {
		p.logger.Error(err, "Listing cached pods for kubedeploy_deployment_unavailable_pods")
		return nil
	}
	return countUnavailable(pods, p.replicaSets, now)
}

// unavailableSeries is the label values of one kubedeploy_deployment_unavailable_pods series.
type unavailableSeries struct {
	namespace, deployment, reason string
}

// countUnavailable returns, per series, how many of pods are not available at now (unavailable.Of with their
// ReplicaSet's minReadySeconds). A pod counts only when its ControllerRef names a ReplicaSet in replicaSets
// (same name and UID) whose own ControllerRef is a Deployment, by ownership's one rule (ownership.DeploymentOfPod);
// others (orphans, other owners, a ReplicaSet not in the cache or owned by something else) are skipped.
func countUnavailable(pods []*v1.Pod, replicaSets appslisters.ReplicaSetLister, now time.Time) map[unavailableSeries]int {
	// All that deploymentOwnerOf reads of a ReplicaSet ControllerRef, so that a pod whose ref is odd (a real
	// ReplicaSet's UID with another name, or in another namespace) neither uses nor spoils another pod's answer.
	type ownerKey struct {
		namespace, name string
		uid             types.UID
	}
	owners := map[ownerKey]*deploymentOwner{} // nil: not a Deployment's ReplicaSet
	counts := map[unavailableSeries]int{}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if !ownership.RefersTo(ref, ownership.ReplicaSetKind) {
			continue
		}
		key := ownerKey{pod.Namespace, ref.Name, ref.UID}
		owner, seen := owners[key]
		if !seen {
			owner = deploymentOwnerOf(pod, replicaSets.ReplicaSets(pod.Namespace))
			owners[key] = owner
		}
		if owner == nil {
			continue
		}
		if reason, _, ok := unavailable.Of(pod, owner.minReadySeconds, now); ok {
			counts[unavailableSeries{pod.Namespace, owner.deployment, reason}]++
		}
	}
	return counts
}

// deploymentOwner is what countUnavailable needs of a pod's ReplicaSet.
type deploymentOwner struct {
	deployment      string
	minReadySeconds int32 // seconds
}

// deploymentOwnerOf returns the Deployment name and minReadySeconds of the ReplicaSet ref names, or nil when
// ref is not a ReplicaSet in replicaSets or that ReplicaSet is not controlled by a Deployment.
func deploymentOwnerOf(pod *v1.Pod, replicaSets appslisters.ReplicaSetNamespaceLister) *deploymentOwner {
	rs, name, ok := ownership.DeploymentOfPod(pod, replicaSets.Get)
	if !ok {
		return nil
	}
	return &deploymentOwner{deployment: name, minReadySeconds: rs.Spec.MinReadySeconds}
}
