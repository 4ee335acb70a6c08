package deployment

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// syncContext is everything one sync of one Deployment works from, computed
// once (house style pattern 4). Strategy steps are its methods. After each
// write the affected object is replaced by the one the API server returned
// (IM-2), so later writes in the same sync carry a current resourceVersion.
type syncContext struct {
	c      *Controller
	key    cache.ObjectName
	logger klog.Logger
	now    time.Time
	// d is our working copy of the Deployment; d.Status is the stored status.
	d *appsv1.Deployment
	// rsList holds the ReplicaSets d owns after claiming (SD-3).
	rsList []*appsv1.ReplicaSet
	// newRS is the ReplicaSet with d's template (RV-1), or nil.
	newRS *appsv1.ReplicaSet
	// oldRSs holds every other owned ReplicaSet, oldest first.
	oldRSs []*appsv1.ReplicaSet
	// podsByRS maps each owned ReplicaSet's UID to the pods it controls (SD-4).
	podsByRS map[types.UID][]*v1.Pod
}

// allRSs returns old ReplicaSets followed by the new one (if any).
func (sc *syncContext) allRSs() []*appsv1.ReplicaSet { return withNew(sc.oldRSs, sc.newRS) }

// syncDeployment reconciles one Deployment key in the order SD-1..SD-13.
// It returns an error to retry with backoff and Result.RequeueAfter for a
// progress-deadline check (ST-16).
func (c *Controller) syncDeployment(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
	logger := klog.FromContext(ctx).WithValues("deployment", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	cached, err := c.dLister.Deployments(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("Deployment has been deleted")
		c.writes.forget(key)
		return runner.Result{}, nil
	}
	if err != nil {
		return runner.Result{}, err
	}
	d := cached.DeepCopy()
	if d.Spec.Selector == nil || reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		return runner.Result{}, c.syncSelectingAll(ctx, d)
	}
	// IM-4: never act on a ReplicaSet cache older than our own last write.
	if err := c.writes.checkObserved(key, func(ns, name string) (*appsv1.ReplicaSet, error) {
		return c.rsLister.ReplicaSets(ns).Get(name)
	}); err != nil {
		return runner.Result{}, err
	}
	rsList, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return runner.Result{}, err
	}
	podsByRS, err := c.podsByReplicaSet(rsList)
	if err != nil {
		return runner.Result{}, err
	}
	sc := &syncContext{c: c, key: key, logger: logger, now: c.clock.Now(), d: d, rsList: rsList, podsByRS: podsByRS}
	return sc.run(ctx)
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
func (c *Controller) syncSelectingAll(ctx context.Context, d *appsv1.Deployment) error {
	c.recorder.Eventf(d, v1.EventTypeWarning, SelectingAll, selectingAllMessage)
	if d.Status.ObservedGeneration >= d.Generation {
		return nil
	}
	d.Status.ObservedGeneration = d.Generation
	if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		klog.FromContext(ctx).Info("Failed to update observedGeneration of a deployment selecting all pods", "err", err)
	}
	return nil
}

// claimReplicaSets lists every ReplicaSet in d's namespace from the cache and
// returns those d owns after adopting matching orphans and releasing owned
// ones that stopped matching (SD-3, AD-1..AD-6). Any adopt/release error is
// returned and nothing else happens this sync.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %v", d.Namespace, d.Name, err)
	}
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	rsClient := c.client.AppsV1().ReplicaSets(d.Namespace)
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
		Patch: func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) error {
			_, err := rsClient.Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
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
