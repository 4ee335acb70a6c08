package deployment

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// deploymentSelector is a Deployment's spec.selector (for ownership.Selecting).
func deploymentSelector(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }

// onDeployment enqueues the Deployment on add, update (resyncs included) and
// delete, tombstones accepted (EH-1).
func (c *Controller) onDeployment(logger klog.Logger, obj any) {
	d, ok := runner.ObjectFrom[*appsv1.Deployment](logger, obj)
	if !ok {
		return
	}
	c.runner.EnqueueObject(d)
}

// deploymentFor resolves a ControllerRef to a cached Deployment (EH-5, by
// ownership's one rule: kind, apps group, name and UID).
func (c *Controller) deploymentFor(namespace string, ref *metav1.OwnerReference) (*appsv1.Deployment, bool) {
	return ownership.Resolve(ref, ownership.DeploymentKind, func(name string) (*appsv1.Deployment, error) {
		return c.dLister.Deployments(namespace).Get(name)
	})
}

// enqueueOwner enqueues the Deployment ref resolves to, if any; it reports
// whether ref was non-nil.
func (c *Controller) enqueueOwner(namespace string, ref *metav1.OwnerReference) bool {
	if ref == nil {
		return false
	}
	if d, ok := c.deploymentFor(namespace, ref); ok {
		c.runner.EnqueueObject(d)
	}
	return true
}

// enqueueMatching enqueues every Deployment in rs's namespace whose
// non-empty selector matches rs's labels (EH-2, EH-3). A ReplicaSet without
// labels matches none.
func (c *Controller) enqueueMatching(logger klog.Logger, rs *appsv1.ReplicaSet) {
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		logger.Info("Failed to list deployments for an orphan replica set", "replicaSet", klog.KObj(rs), "err", err)
		return
	}
	for _, d := range ownership.Selecting(ds, deploymentSelector, rs.Labels) {
		c.runner.EnqueueObject(d)
	}
}

// onReplicaSetAdd handles EH-2.
func (c *Controller) onReplicaSetAdd(logger klog.Logger, obj any) {
	rs, ok := runner.ObjectFrom[*appsv1.ReplicaSet](logger, obj)
	switch {
	case !ok:
	case rs.DeletionTimestamp != nil: // added while being deleted (e.g. after a restart)
		c.onReplicaSetDelete(logger, rs)
	case !c.enqueueOwner(rs.Namespace, metav1.GetControllerOfNoCopy(rs)):
		c.enqueueMatching(logger, rs)
	}
}

// onReplicaSetUpdate handles EH-3: resyncs (same resourceVersion) are ignored.
func (c *Controller) onReplicaSetUpdate(logger klog.Logger, oldObj, curObj any) {
	old, ok1 := runner.ObjectFrom[*appsv1.ReplicaSet](logger, oldObj)
	cur, ok2 := runner.ObjectFrom[*appsv1.ReplicaSet](logger, curObj)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(old), metav1.GetControllerOfNoCopy(cur)
	refChanged := !reflect.DeepEqual(oldRef, curRef)
	if refChanged && oldRef != nil {
		c.enqueueOwner(old.Namespace, oldRef)
	}
	if !refChanged && curRef != nil && runner.StatusOnlyUpdate(old, cur) {
		// The ReplicaSet controller reported new counts: coalesced, so a
		// rollout's stream of them costs one sync per window.
		if d, ok := c.deploymentFor(cur.Namespace, curRef); ok {
			c.runner.EnqueueCoalesced(cache.MetaObjectToName(d), c.statusSyncWindow)
		}
		return
	}
	if c.enqueueOwner(cur.Namespace, curRef) {
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		c.enqueueMatching(logger, cur)
	}
}

// onReplicaSetDelete handles EH-4: the owner is enqueued, orphans ignored.
func (c *Controller) onReplicaSetDelete(logger klog.Logger, obj any) {
	rs, ok := runner.ObjectFrom[*appsv1.ReplicaSet](logger, obj)
	if !ok {
		return
	}
	c.enqueueOwner(rs.Namespace, metav1.GetControllerOfNoCopy(rs))
}

// onPodDelete handles EH-7/EH-8 (the Recreate wake-up, RC-8): when a pod of a
// Recreate Deployment's ReplicaSet goes away and none of that Deployment's
// ReplicaSets own pods any more, the Deployment is enqueued. A rolling
// Deployment opted into TerminationComplete (EX-3) is enqueued on every pod
// deletion: a pod gone is headroom for the new ReplicaSet.
//
// Deviation from EH-8: upstream lists the ReplicaSets live from the API
// inside the handler; kubedeploy reads them from the ReplicaSet cache (by
// ControllerRef index, filtered by selector) so handlers never call the API.
// A stale cache can only cause a harmless extra or a later enqueue, and the
// sync itself re-checks old pods (RC-3).
func (c *Controller) onPodDelete(logger klog.Logger, obj any) {
	pod, ok := runner.ObjectFrom[*v1.Pod](logger, obj)
	if !ok {
		return
	}
	rs, ok := ownership.ReplicaSetOf(pod, c.rsLister.ReplicaSets(pod.Namespace).Get)
	if !ok {
		return
	}
	d, ok := c.deploymentFor(rs.Namespace, metav1.GetControllerOfNoCopy(rs))
	if !ok {
		return
	}
	if waitsForTermination(d) {
		c.runner.EnqueueObject(d)
		return
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return
	}
	if c.deploymentOwnsPods(d) {
		return
	}
	c.runner.EnqueueObject(d)
}

// deploymentOwnsPods reports whether any cached ReplicaSet controlled by d
// and matching its selector controls a cached pod. Lookup errors count as
// "owns pods" (no wake-up; a later event or resync brings one).
func (c *Controller) deploymentOwnsPods(d *appsv1.Deployment) bool {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return true
	}
	rss, err := ownership.ByController[*appsv1.ReplicaSet](c.rsIndexer, d.UID)
	if err != nil {
		return true
	}
	for _, rs := range rss {
		if !selector.Matches(labels.Set(rs.Labels)) {
			continue
		}
		pods, err := ownership.ByController[*v1.Pod](c.podIndexer, rs.UID)
		if err != nil || len(pods) > 0 {
			return true
		}
	}
	return false
}
