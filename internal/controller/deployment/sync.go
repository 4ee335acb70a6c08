package deployment

import (
	"context"
	"fmt"
	"reflect"

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
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// syncDeployment reconciles one Deployment key in the order SD-1..SD-13.
// It returns an error to retry with backoff and Result.RequeueAfter for a
// progress-deadline check (ST-16). IM-4: while the caches do not show this
// controller's own writes for the Deployment it waits (runner.ErrCacheBehind); once
// they have been behind for longer than MaxCacheWait it reads the Deployment
// and the namespace's ReplicaSets from the API server, acts on that, and
// checks again after MaxCacheWait.
func (c *Controller) syncDeployment(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
	logger := klog.FromContext(ctx).WithValues("deployment", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	freshness := c.freshness.Check(logger, key.String())
	if freshness == expectations.Behind {
		return runner.Result{}, fmt.Errorf("Deployment %s: %w", key, runner.ErrCacheBehind)
	}
	live := freshness == expectations.Stale
	stored, err := c.getDeployment(ctx, key, live)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("Deployment has been deleted")
		c.freshness.Forget(key.String())
		return runner.Result{}, nil
	}
	if err != nil {
		return runner.Result{}, err
	}
	d := stored.DeepCopy()
	if d.Spec.Selector == nil || reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		return runner.Result{}, c.syncSelectingAll(ctx, key, d)
	}
	rsList, err := c.claimReplicaSets(ctx, key, d, live)
	if err != nil {
		return runner.Result{}, err
	}
	podsByRS, err := c.podsByReplicaSet(rsList)
	if err != nil {
		return runner.Result{}, err
	}
	f, err := fencepostsOf(d)
	if err != nil {
		return runner.Result{}, fmt.Errorf("Deployment %s has an invalid spec.strategy.rollingUpdate: %w", key, err)
	}
	sc := &syncContext{c: c, key: key, logger: logger, now: c.clock.Now(), d: d, f: f, rsList: rsList, podsByRS: podsByRS}
	res, err := sc.run(ctx)
	if err == nil {
		res.RequeueAfter = c.freshness.NextCheck(freshness, res.RequeueAfter)
	}
	return res, err
}

// getDeployment returns the Deployment from the cache or, when live, from
// the API server (a quorum read; IM-4). It returns the lister's or the API's
// error, NotFound included.
func (c *Controller) getDeployment(ctx context.Context, key cache.ObjectName, live bool) (*appsv1.Deployment, error) {
	if live {
		return c.client.AppsV1().Deployments(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	}
	return c.dLister.Deployments(key.Namespace).Get(key.Name)
}

// listReplicaSets returns every ReplicaSet in namespace from the cache or,
// when live, from the API server (a quorum read; IM-4).
func (c *Controller) listReplicaSets(ctx context.Context, namespace string, live bool) ([]*appsv1.ReplicaSet, error) {
	if !live {
		return c.rsLister.ReplicaSets(namespace).List(labels.Everything())
	}
	list, err := c.client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets in %s from the API server: %w", namespace, err)
	}
	out := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// run performs SD-5..SD-10 on a prepared context.
func (sc *syncContext) run(ctx context.Context) (runner.Result, error) {
	if sc.d.DeletionTimestamp != nil {
		// SD-5: only resolve (no creation) and write plain status.
		if err := sc.resolveReplicaSets(ctx); err != nil {
			return runner.Result{}, err
		}
		return runner.Result{}, sc.syncStatus(ctx)
	}
	if err := sc.checkPausedConditions(ctx); err != nil {
		return runner.Result{}, err
	}
	if err := sc.resolveReplicaSets(ctx); err != nil {
		return runner.Result{}, err
	}
	if sc.d.Spec.Paused {
		return runner.Result{}, sc.syncScaleOrPaused(ctx) // SD-7
	}
	if _, ok := rollbackTo(sc.d); ok {
		return runner.Result{}, sc.rollback(ctx) // SD-8
	}
	if isScalingEvent(sc.d, sc.allRSs()) {
		return runner.Result{}, sc.syncScaleOrPaused(ctx) // SD-9
	}
	switch sc.d.Spec.Strategy.Type { // SD-10
	case appsv1.RecreateDeploymentStrategyType:
		return sc.rolloutRecreate(ctx)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return sc.rolloutRolling(ctx)
	default:
		return runner.Result{}, unexpectedStrategyError(sc.d)
	}
}

// syncSelectingAll handles a Deployment with an empty (or nil) selector
// (SD-2): a Warning event, observedGeneration advanced (write error only
// logged), success. A nil selector (also rejected by validation) is handled
// the same way rather than releasing every owned ReplicaSet.
func (c *Controller) syncSelectingAll(ctx context.Context, key cache.ObjectName, d *appsv1.Deployment) error {
	c.recorder.Eventf(d, v1.EventTypeWarning, SelectingAll, selectingAllMessage)
	if d.Status.ObservedGeneration >= d.Generation {
		return nil
	}
	d.Status.ObservedGeneration = d.Generation
	if _, err := c.updateStatus(ctx, key, d); err != nil {
		klog.FromContext(ctx).Info("Failed to update observedGeneration of a deployment selecting all pods", "err", err)
	}
	return nil
}

// claimReplicaSets lists every ReplicaSet in d's namespace (from the cache,
// or from the API server when live) and returns those d owns after adopting
// matching orphans and releasing owned ones that stopped matching (SD-3,
// AD-1..AD-6); adopted ones as the API server returned them, each adoption
// remembered for IM-4 (IM-2). Any adopt/release error is returned and
// nothing else happens this sync.
func (c *Controller) claimReplicaSets(ctx context.Context, key cache.ObjectName, d *appsv1.Deployment, live bool) ([]*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %v", d.Namespace, d.Name, err)
	}
	all, err := c.listReplicaSets(ctx, d.Namespace, live)
	if err != nil {
		return nil, err
	}
	claimer := &ownership.Claimer[*appsv1.ReplicaSet]{
		Owner:      d,
		OwnerKind:  controllerKind,
		ObjectKind: "ReplicaSet",
		Selector:   selector,
		CanAdopt: ownership.RecheckDeletionTimestamp(d, "Deployment", func(ctx context.Context) (metav1.Object, error) {
			fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return fresh, nil
		}),
		Patch: func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) (*appsv1.ReplicaSet, error) {
			return c.patchOwnership(ctx, key, rs, patch)
		},
	}
	return claimer.Claim(ctx, all)
}

// podsByReplicaSet returns, for every ReplicaSet in rsList, the cached pods
// whose ControllerRef is that ReplicaSet, whatever their labels or phase (SD-4).
// Every ReplicaSet has an entry, possibly empty.
func (c *Controller) podsByReplicaSet(rsList []*appsv1.ReplicaSet) (map[types.UID][]*v1.Pod, error) {
	out := make(map[types.UID][]*v1.Pod, len(rsList))
	for _, rs := range rsList {
		pods, err := ownership.ByController[*v1.Pod](c.podIndexer, rs.UID)
		if err != nil {
			return nil, err
		}
		out[rs.UID] = pods
	}
	return out, nil
}

// syncScaleOrPaused is `sync` (SD-11): proportional scaling, history cleanup
// when paused without a rollback request, then a plain status sync.
func (sc *syncContext) syncScaleOrPaused(ctx context.Context) error {
	if err := sc.scale(ctx); err != nil {
		return err
	}
	if _, ok := rollbackTo(sc.d); sc.d.Spec.Paused && !ok {
		if err := sc.cleanupDeployment(ctx); err != nil {
			return err
		}
	}
	return sc.syncStatus(ctx)
}
