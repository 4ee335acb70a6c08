package deployment

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/controller/expectations"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
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
	if unsupported, err := c.templates.UnsupportedFields(ctx, d); len(unsupported) > 0 || err != nil {
		return runner.Result{}, c.refuseUnsupported(ctx, d, unsupported, err)
	}
	if selectsAll(d.Spec.Selector) {
		return runner.Result{}, c.syncSelectingAll(ctx, key, d)
	}
	rsList, err := c.claimReplicaSets(ctx, key, d, live)
	if err != nil {
		return runner.Result{}, err
	}
	if err := c.resolveTemplates(ctx, rsList); err != nil {
		return runner.Result{}, err
	}
	pendingByRS := c.pendingCreationsByReplicaSet(d, rsList)
	f, err := rolloutstate.FencepostsOf(d)
	if err != nil {
		return runner.Result{}, fmt.Errorf("Deployment %s has an invalid spec.strategy.rollingUpdate: %w", key, err)
	}
	partition := partitionOf(d)
	if partition.invalid != nil {
		// Once per sync, here where it is read; the recorder aggregates repeats.
		c.recorder.Eventf(d, v1.EventTypeWarning, InvalidRolloutPartition, "%v; %s", partition.invalid, partition.invalid.Effect)
	}
	sc := &syncContext{c: c, key: key, logger: logger, now: c.clock.Now(), d: d, f: f, partition: partition, rsList: rsList, pendingByRS: pendingByRS}
	res, err := sc.run(ctx)
	if sc.requeueAfter > 0 && (res.RequeueAfter == 0 || sc.requeueAfter < res.RequeueAfter) {
		res.RequeueAfter = sc.requeueAfter // EX-5: a timed pause ends
	}
	if err == nil {
		res.RequeueAfter = c.freshness.NextCheck(freshness, res.RequeueAfter)
	}
	return res, err
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
	if err := sc.syncPolicyAnnotations(ctx); err != nil { // EX-0
		return runner.Result{}, err
	}
	if err := sc.syncSteps(ctx); err != nil { // EX-5
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
	if sc.autoRollbackDue() { // EX-2
		if rolledBack, err := sc.autoRollback(ctx); err != nil || rolledBack {
			return runner.Result{}, err
		}
	}
	if why := sc.abortDue(); why != "" { // EX-5, EX-6
		return runner.Result{}, sc.abortRollout(ctx, why)
	}
	switch sc.d.Spec.Strategy.Type { // SD-10
	case appsv1.RecreateDeploymentStrategyType:
		if sc.partition.steps != nil { // EX-5: invalid on Recreate, held
			return sc.syncRolloutStatus(ctx)
		}
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

// refuseUnsupported is the sync of a Deployment with spec fields outside its pod template that kubedeploy's API
// does not know (IM-8): it writes nothing to d or its ReplicaSets, since it cannot tell what they ask for, and
// emits the Warning event UnsupportedDeploymentField naming them on every sync (as SD-2's SelectingAll; the
// recorder aggregates repeats). err (from the lookup: the generation in hand is not the one last seen) is returned
// as it is, to retry.
func (c *Controller) refuseUnsupported(ctx context.Context, d *appsv1.Deployment, fields []string, err error) error {
	if err != nil {
		return err
	}
	c.recorder.Eventf(d, v1.EventTypeWarning, UnsupportedDeploymentField,
		"Not managing this deployment: kubedeploy %s, built against Kubernetes %s, does not know %s; remove the field or run a kubedeploy built against the cluster's Kubernetes version",
		buildinfo.Version(), buildinfo.KubernetesVersion(), strings.Join(fields, ", "))
	klog.FromContext(ctx).V(2).Info("Not managing a deployment with fields this kubedeploy does not know", "fields", fields,
		"builtAgainst", buildinfo.KubernetesVersion())
	return nil
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

// selectsAll reports whether sel is nil or has neither matchLabels nor
// matchExpressions: a Deployment selecting every pod in its namespace (SD-2;
// rejected by validation, VA-4). Upstream compares with an empty
// LabelSelector, which misses empty but non-nil maps.
func selectsAll(sel *metav1.LabelSelector) bool {
	return sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
}
