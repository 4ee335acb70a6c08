package replicaset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// syncContext is what one sync computes once (house style 4).
type syncContext struct {
	// key is "ns/name" of the ReplicaSet.
	key string
	// live is true when the caches are Stale (IM-4): rs and the candidate
	// pods were read from the API server, not from the informer caches.
	live bool
	// rs is a deep copy of the ReplicaSet.
	rs       *appsv1.ReplicaSet
	selector labels.Selector
	// now is the single "now" of the sync (RS-7, RS-15).
	now time.Time
	// pods are the active pods rs controls after claiming (RS-4).
	pods []*v1.Pod
	// terminating is RS-5's count (gate DeploymentReplicaSetTerminatingReplicas on).
	terminating *int32
}

// sync reconciles one ReplicaSet (RS-1..RS-7). IM-4: while the caches do
// not show this controller's own writes for the ReplicaSet, it waits
// (ErrCacheBehind); once they have been behind for longer than MaxCacheWait,
// it reads the ReplicaSet and its pods from the API server and acts on that,
// checking again after MaxCacheWait. The expectations TTL never lets it act
// on a cache older than its own writes.
func (c *Controller) sync(ctx context.Context, name cache.ObjectName) (runner.Result, error) {
	logger := klog.FromContext(ctx)
	key := name.String()
	start := c.cfg.Clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing ReplicaSet", "replicaSet", klog.KRef(name.Namespace, name.Name), "duration", c.cfg.Clock.Since(start))
	}()
	freshness := c.freshness.Check(logger, key)
	if freshness == expectations.Behind {
		return runner.Result{}, fmt.Errorf("ReplicaSet %s: %w", key, runner.ErrCacheBehind)
	}
	live := freshness == expectations.Stale
	rs, err := c.getReplicaSet(ctx, name, live)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("ReplicaSet has been deleted", "replicaSet", klog.KRef(name.Namespace, name.Name))
		c.freshness.Forget(key)
		c.expectations.DeleteExpectations(logger, key)
		return runner.Result{}, nil
	}
	if err != nil {
		return runner.Result{}, err
	}
	// Expectations count cache events; a live read already shows the truth.
	needsSync := live || c.expectations.SatisfiedExpectations(logger, key)
	selector, ok := ownership.Selector(rs.Spec.Selector)
	if !ok {
		// RS-3: not retried; a spec change will enqueue the ReplicaSet again.
		logger.Info("Ignoring ReplicaSet with a missing, empty or invalid selector", "replicaSet", klog.KObj(rs))
		return runner.Result{}, nil
	}
	sc := &syncContext{key: key, live: live, rs: rs.DeepCopy(), selector: selector, now: c.cfg.Clock.Now()}
	if err := c.claimPods(ctx, sc); err != nil {
		return runner.Result{}, err
	}
	var manageErr error
	if needsSync && sc.rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, sc)
	}
	status := calculateStatus(sc.rs, sc.pods, sc.terminating, manageErr, sc.now)
	if _, err := c.updateStatus(ctx, sc.rs, status); err != nil {
		return runner.Result{}, err
	}
	if manageErr != nil {
		return runner.Result{}, manageErr
	}
	next, ok := nextAvailableCheck(sc.rs, sc.pods, status, sc.now)
	if !ok {
		next = 0
	}
	return runner.Result{RequeueAfter: c.freshness.NextCheck(freshness, next)}, nil
}

// getReplicaSet returns the ReplicaSet from the cache or, when live, from the
// API server (a quorum read; IM-4). It returns the lister's or the API's
// error, NotFound included.
func (c *Controller) getReplicaSet(ctx context.Context, name cache.ObjectName, live bool) (*appsv1.ReplicaSet, error) {
	if live {
		return c.cfg.Client.GetReplicaSet(ctx, name.Namespace, name.Name)
	}
	return c.rsLister.ReplicaSets(name.Namespace).Get(name.Name)
}

// candidatePods returns the pods RS-4 considers: from the cache, those
// indexed as controlled by sc.rs plus the namespace's orphans; when sc.live,
// the pods matching sc.rs's selector, listed from the API server (a quorum
// read; IM-4). Pods owned by sc.rs that stopped matching are then not seen,
// so they are released on a later sync instead.
func (c *Controller) candidatePods(ctx context.Context, sc *syncContext) ([]*v1.Pod, error) {
	if sc.live {
		list, err := c.cfg.Client.ListPods(ctx, sc.rs.Namespace, sc.selector)
		if err != nil {
			return nil, fmt.Errorf("listing pods of ReplicaSet %s from the API server: %w", sc.key, err)
		}
		return rolloutstate.Items(list.Items), nil
	}
	return ownership.Candidates[*v1.Pod](c.podIndexer, sc.rs.UID, sc.rs.Namespace)
}

// claimPods fills sc.pods and sc.terminating (RS-4, RS-5, AD-8) from the
// candidate pods: only active ones are claimed (adopted or released as AD-1
// says).
func (c *Controller) claimPods(ctx context.Context, sc *syncContext) error {
	candidates, err := c.candidatePods(ctx, sc)
	if err != nil {
		return err
	}
	active := make([]*v1.Pod, 0, len(candidates))
	var terminating int32
	for _, p := range candidates {
		switch {
		case p.Namespace != sc.rs.Namespace:
		case isPodActive(p):
			active = append(active, p)
		case p.DeletionTimestamp != nil && !isTerminal(p) && isControlledBy(p, sc.rs.UID) && sc.selector.Matches(labels.Set(p.Labels)):
			terminating++
		}
	}
	sc.terminating = &terminating
	claimer := &ownership.Claimer[*v1.Pod]{
		Owner:      sc.rs,
		OwnerKind:  controllerKind,
		ObjectKind: "Pod",
		Selector:   sc.selector,
		CanAdopt:   ownership.RecheckDeletionTimestamp(sc.rs, controllerKind.Kind, c.getFreshReplicaSet(sc.rs)),
		Patch: func(ctx context.Context, pod *v1.Pod, patch []byte) (*v1.Pod, error) {
			return c.patchPod(ctx, sc.key, pod, patch)
		},
	}
	sc.pods, err = claimer.Claim(ctx, active)
	return err
}

// getFreshReplicaSet returns an uncached, quorum read of rs for AD-3.
func (c *Controller) getFreshReplicaSet(rs *appsv1.ReplicaSet) func(ctx context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		fresh, err := c.cfg.Client.GetReplicaSet(ctx, rs.Namespace, rs.Name)
		if err != nil {
			return nil, err
		}
		return fresh, nil
	}
}

// patchPod sends an adopt or release patch (AD-4, AD-5), remembers the write
// for the IM-4 guard and returns the patched pod (IM-2).
func (c *Controller) patchPod(ctx context.Context, key string, pod *v1.Pod, patch []byte) (*v1.Pod, error) {
	updated, err := c.cfg.Client.PatchPod(ctx, pod.Namespace, pod.Name, types.StrategicMergePatchType, patch)
	if err != nil {
		return nil, err
	}
	c.freshness.Written(key, resourcePods, updated)
	return updated, nil
}

// relatedPods returns the pods selected by any ReplicaSet that shares rs's
// controller (rs included), deduplicated by UID, for RS-14's rank. An rs
// without a controller has no related pods, so every rank is 0. A selector
// that pins pod-template-hash (every Deployment's ReplicaSet, OM-10) is
// answered from the pod-template-hash index, any other by reading the whole
// namespace (ownership.SelectedBy): the same pods either way, but a
// scale-down in a namespace of 10,000 pods no longer reads them all (issue 10:
// half of the controllers' CPU in the many-Deployments rollout was here).
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet) ([]*v1.Pod, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	all, err := c.rsLister.ReplicaSets(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	seen := map[types.UID]bool{}
	var out []*v1.Pod
	for _, other := range all {
		if otherRef := metav1.GetControllerOfNoCopy(other); otherRef == nil || otherRef.UID != ref.UID {
			continue
		}
		sel, ok := ownership.Selector(other.Spec.Selector)
		if !ok {
			continue
		}
		pods, err := ownership.SelectedBy[*v1.Pod](c.podIndexer, rs.Namespace, other.Spec.Selector, sel, appsv1.DefaultDeploymentUniqueLabelKey)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// isTerminal reports whether pod has finished (Succeeded or Failed).
func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// isControlledBy reports whether pod's ControllerRef names the ReplicaSet
// with uid (ownership.ControllerUID, the one ControllerRef rule).
func isControlledBy(pod *v1.Pod, uid types.UID) bool {
	owner, ok := ownership.ControllerUID(pod)
	return ok && owner == uid
}
