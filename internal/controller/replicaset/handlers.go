package replicaset

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// onReplicaSetAdd enqueues a new ReplicaSet (EH-9).
func (c *Controller) onReplicaSetAdd(logger klog.Logger, obj any) {
	rs, ok := runner.ObjectFrom[*appsv1.ReplicaSet](logger, obj)
	if !ok {
		return
	}
	logger.V(4).Info("Adding ReplicaSet", "replicaSet", klog.KObj(rs))
	c.runner.EnqueueObject(rs)
}

// onReplicaSetUpdate enqueues every update, resyncs included, status-only
// ones coalesced (Config.StatusSyncWindow); a UID change means the old object
// was deleted and recreated under the same name (EH-9).
func (c *Controller) onReplicaSetUpdate(logger klog.Logger, oldObj, curObj any) {
	oldRS, ok1 := runner.ObjectFrom[*appsv1.ReplicaSet](logger, oldObj)
	curRS, ok2 := runner.ObjectFrom[*appsv1.ReplicaSet](logger, curObj)
	if !ok1 || !ok2 {
		return
	}
	if oldRS.UID != curRS.UID {
		c.onReplicaSetDelete(logger, cache.DeletedFinalStateUnknown{Key: keyOf(oldRS), Obj: oldRS})
		c.runner.EnqueueObject(curRS)
		return
	}
	if runner.StatusOnlyUpdate(oldRS, curRS) {
		// Typically our own status write coming back: coalesced, so it does
		// not start a new status write of its own for every pod change.
		c.runner.EnqueueCoalesced(cache.MetaObjectToName(curRS), c.cfg.StatusSyncWindow)
		return
	}
	c.runner.EnqueueObject(curRS)
}

// onReplicaSetDelete clears the read-your-writes record and expectations of a
// deleted ReplicaSet and enqueues it (EH-9, RS-11).
func (c *Controller) onReplicaSetDelete(logger klog.Logger, obj any) {
	rs, ok := runner.ObjectFrom[*appsv1.ReplicaSet](logger, obj)
	if !ok {
		return
	}
	key := keyOf(rs)
	logger.V(4).Info("Deleting ReplicaSet", "replicaSet", klog.KObj(rs))
	c.freshness.Forget(key)
	c.expectations.DeleteExpectations(logger, key)
	c.runner.EnqueueObject(rs)
}

// resolveOwner returns the ReplicaSet named by ref in namespace, if ref is a
// ReplicaSet ControllerRef whose UID matches the cached object (EH-5, by
// ownership's one rule: kind, apps group, name and UID).
func (c *Controller) resolveOwner(namespace string, ref *metav1.OwnerReference) (*appsv1.ReplicaSet, bool) {
	return ownership.Resolve(ref, ownership.ReplicaSetKind, func(name string) (*appsv1.ReplicaSet, error) {
		return c.rsLister.ReplicaSets(namespace).Get(name)
	})
}

// onPodAdd observes a creation for the owning ReplicaSet and enqueues it, or
// enqueues every ReplicaSet that could adopt an orphan (EH-10).
func (c *Controller) onPodAdd(logger klog.Logger, obj any) {
	pod, ok := runner.ObjectFrom[*v1.Pod](logger, obj)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// A pod created already terminating (e.g. after a restart) is a deletion.
		c.onPodDelete(logger, pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		rs, ok := c.resolveOwner(pod.Namespace, ref)
		if !ok {
			return
		}
		logger.V(4).Info("Pod created", "pod", klog.KObj(pod), "replicaSet", klog.KObj(rs))
		c.expectations.CreationObserved(logger, keyOf(rs))
		c.enqueueObserved(rs)
		return
	}
	for _, rs := range c.replicaSetsSelecting(logger, pod) {
		c.runner.EnqueueObject(rs)
	}
}

// onPodUpdate handles pod updates (EH-11).
func (c *Controller) onPodUpdate(logger klog.Logger, oldObj, curObj any) {
	oldPod, ok1 := runner.ObjectFrom[*v1.Pod](logger, oldObj)
	curPod, ok2 := runner.ObjectFrom[*v1.Pod](logger, curObj)
	if !ok1 || !ok2 || oldPod.ResourceVersion == curPod.ResourceVersion {
		return
	}
	labelsChanged := !equality.Semantic.DeepEqual(oldPod.Labels, curPod.Labels)
	if curPod.DeletionTimestamp != nil {
		// Graceful deletion has started: observe it now rather than when the
		// kubelet finishes (RS-10).
		c.onPodDelete(logger, curPod)
		if labelsChanged {
			c.onPodDelete(logger, oldPod)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(curPod), metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs, ok := c.resolveOwner(oldPod.Namespace, oldRef); ok {
			c.runner.EnqueueObject(rs)
		}
	}
	if curRef != nil {
		if rs, ok := c.resolveOwner(curPod.Namespace, curRef); ok {
			c.enqueueUpdatedPodOwner(logger, rs, oldPod, curPod, refChanged || labelsChanged)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, rs := range c.replicaSetsSelecting(logger, curPod) {
			c.runner.EnqueueObject(rs)
		}
	}
}

// enqueueUpdatedPodOwner enqueues rs, the controller of a pod updated from
// oldPod to curPod: at once when its ControllerRef or labels changed
// (ownerOrLabels) or it started or stopped being active; when only its
// status changed (the sync can only rewrite the ReplicaSet's status), a
// StatusSyncWindow after a readiness change or coalesced. It enqueues rs again
// minReadySeconds after the pod turned Ready (EH-11).
func (c *Controller) enqueueUpdatedPodOwner(logger klog.Logger, rs *appsv1.ReplicaSet, oldPod, curPod *v1.Pod, ownerOrLabels bool) {
	switch {
	case ownerOrLabels || isPodActive(oldPod) != isPodActive(curPod):
		c.runner.EnqueueObject(rs)
	case isPodReady(oldPod) != isPodReady(curPod) && c.cfg.StatusSyncWindow > 0:
		// Readiness is reported a window after the first pod of a burst
		// turns (or stops being) Ready, together with the rest of the burst:
		// the pods of one rollout step, created together, turn Ready within
		// milliseconds of each other, and reported one by one they would
		// make the Deployment controller split the step into smaller ones
		// that `rollout plan` cannot predict (issue 11). A key already
		// waiting keeps its earlier time.
		c.runner.EnqueueAfter(cache.MetaObjectToName(rs), c.cfg.StatusSyncWindow)
	default:
		c.runner.EnqueueCoalesced(cache.MetaObjectToName(rs), c.cfg.StatusSyncWindow)
	}
	// EH-11: wake up when the pod becomes available (IM-5: AddAfter).
	if !isPodReady(oldPod) && isPodReady(curPod) && rs.Spec.MinReadySeconds > 0 {
		d := minReady(rs)
		logger.V(2).Info("Pod became ready; checking availability later", "pod", klog.KObj(curPod), "replicaSet", klog.KObj(rs), "after", d)
		c.runner.EnqueueAfter(cache.ObjectName{Namespace: rs.Namespace, Name: rs.Name}, d)
	}
}

// onPodDelete observes an expected deletion for the owning ReplicaSet and
// enqueues it; orphans are ignored (EH-12).
func (c *Controller) onPodDelete(logger klog.Logger, obj any) {
	pod, ok := runner.ObjectFrom[*v1.Pod](logger, obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	rs, ok := c.resolveOwner(pod.Namespace, ref)
	if !ok {
		return
	}
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "replicaSet", klog.KObj(rs))
	c.expectations.DeletionObserved(logger, keyOf(rs), podKey(pod))
	c.enqueueObserved(rs)
}

// enqueueObserved enqueues rs after one of its pods was created or deleted:
// at once when its expectations are satisfied (the sync may manage replicas),
// coalesced (Config.StatusSyncWindow) while creations or deletions are still
// expected, when the sync can only rewrite status (RS-3, RS-7).
func (c *Controller) enqueueObserved(rs *appsv1.ReplicaSet) {
	if add, del, exists := c.expectations.Pending(keyOf(rs)); exists && (add > 0 || del > 0) {
		c.runner.EnqueueCoalesced(cache.MetaObjectToName(rs), c.cfg.StatusSyncWindow)
		return
	}
	c.runner.EnqueueObject(rs)
}

// replicaSetsSelecting returns the ReplicaSets in pod's namespace whose
// non-empty, valid selector matches pod's labels (EH-10, EH-11).
func (c *Controller) replicaSetsSelecting(logger klog.Logger, pod *v1.Pod) []*appsv1.ReplicaSet {
	all, err := c.rsLister.ReplicaSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing ReplicaSets for an orphan pod", "pod", klog.KObj(pod))
		return nil
	}
	return ownership.Selecting(all, replicaSetSelector, pod.Labels)
}

// replicaSetSelector is a ReplicaSet's spec.selector (for ownership.Selecting).
func replicaSetSelector(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }

// podKey is the expectations key of pod, "ns/name" (RS-10).
func podKey(pod *v1.Pod) string {
	return cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}.String()
}

// keyOf is the queue and expectations key of rs, "ns/name".
func keyOf(rs *appsv1.ReplicaSet) string {
	return cache.ObjectName{Namespace: rs.Namespace, Name: rs.Name}.String()
}
