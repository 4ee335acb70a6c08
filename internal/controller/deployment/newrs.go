package deployment

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// resolveReplicaSets finds the new and old ReplicaSets without creating one
// (RV-1) and brings an existing new ReplicaSet's annotations, revision and
// minReadySeconds up to date (RV-2). If the ReplicaSet needed no write, d's
// revision annotation and FoundNewReplicaSet condition follow it (RV-3).
func (sc *syncContext) resolveReplicaSets(ctx context.Context) error {
	sc.newRS = findNewReplicaSet(sc.c.templates, sc.d, sc.rsList)
	sc.oldRSs = rolloutstate.OldReplicaSets(sc.rsList, sc.newRS)
	if sc.newRS == nil {
		return nil
	}
	newRevision := maxRevision(sc.oldRSs) + 1
	rsCopy := sc.newRS.DeepCopy()
	changed := setNewReplicaSetRevision(sc.d, rsCopy, newRevision)
	if rsCopy.Spec.MinReadySeconds != sc.d.Spec.MinReadySeconds {
		rsCopy.Spec.MinReadySeconds = sc.d.Spec.MinReadySeconds
		changed = true
	}
	if changed {
		// EX-0 rides on RV-2's write, so syncPolicyAnnotations has nothing
		// left to write for the new ReplicaSet.
		setPolicyAnnotations(sc.d, rsCopy)
		// RV-2: write and stop here; d follows on a later sync.
		_, err := sc.patchReplicaSet(ctx, sc.newRS, rsCopy)
		return err
	}
	update := sc.setDeploymentRevision(sc.newRS.Annotations[rolloutstate.RevisionAnnotation])
	if rolloutstate.HasProgressDeadline(sc.d) && rolloutstate.Condition(&sc.d.Status, appsv1.DeploymentProgressing) == nil {
		msg := fmt.Sprintf("Found new replica set %q", sc.newRS.Name)
		setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, FoundNewReplicaSet, msg, sc.now))
		update = true
	}
	if !update {
		return nil
	}
	return sc.writeStatus(ctx)
}

// setDeploymentRevision sets d's revision annotation (RV-8) and reports
// whether it changed.
func (sc *syncContext) setDeploymentRevision(rev string) bool {
	if sc.d.Annotations[rolloutstate.RevisionAnnotation] == rev {
		return false
	}
	if sc.d.Annotations == nil {
		sc.d.Annotations = map[string]string{}
	}
	sc.d.Annotations[rolloutstate.RevisionAnnotation] = rev
	return true
}

// ensureNewReplicaSet creates the new ReplicaSet if resolveReplicaSets found
// none (RV-5, RV-9..RV-13). It is a no-op when one exists.
func (sc *syncContext) ensureNewReplicaSet(ctx context.Context) error {
	if sc.newRS != nil {
		return nil
	}
	newRevision := maxRevision(sc.oldRSs) + 1
	size, err := sc.newReplicaSetSize() // sc.newRS is nil: from 0
	if err != nil {
		return err
	}
	// IM-8: the template as stored, when it has fields kubedeploy's API does not know.
	stored, err := sc.c.templates.Template(ctx, sc.d)
	if err != nil {
		return err
	}
	rs := newReplicaSet(sc.d, sc.f, newRevision, size, sc.c.templates.Fingerprint(sc.d))
	created, existed, err := sc.createReplicaSet(ctx, rs, stored)
	if err != nil {
		return err
	}
	sc.newRS = created
	sc.rsList = append(sc.rsList, created)
	if !existed && size > 0 {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeNormal, ScalingReplicaSet, "Scaled up replica set %s from 0 to %d", created.Name, size)
	}
	update := sc.setDeploymentRevision(strconv.FormatInt(newRevision, 10))
	if !existed && rolloutstate.HasProgressDeadline(sc.d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetCreated, msg, sc.now))
		update = true
	}
	if !update {
		return nil
	}
	return sc.writeStatus(ctx)
}

// newReplicaSet builds the new ReplicaSet for d (RV-9, OM-10..OM-12, OM-21,
// OM-24): d's template plus the pod-template-hash label in labels, selector
// and template; name "<d>-<hash>", the hash folding in unknown (the
// fingerprint of the template's fields kubedeploy's API does not know, ""
// when none: IM-8); copied annotations plus revision and desired/max from f;
// size replicas.
func newReplicaSet(d *appsv1.Deployment, f rolloutstate.Fenceposts, revision int64, size int32, unknown string) *appsv1.ReplicaSet {
	hash := hashTemplate(&d.Spec.Template, unknown, d.Status.CollisionCount)
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            replicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ownership.NewControllerRef(d, controllerKind)},
			Labels:          withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash),
			Annotations:     map[string]string{},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &size,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	copyDeploymentAnnotations(d, rs)
	setPolicyAnnotations(d, rs)
	rs.Annotations[rolloutstate.RevisionAnnotation] = strconv.FormatInt(revision, 10)
	setReplicasAnnotations(rs, f.Replicas, f.MaxTotal())
	return rs
}

// withLabel returns a copy of m with key=value added.
func withLabel(m map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[key] = value
	return out
}

// createReplicaSet creates rs (RV-9), with d's pod template as stored when
// stored is not nil (IM-8). On AlreadyExists it returns the cached
// ReplicaSet of that name with existed=true when it is d's and has d's
// template; otherwise it records a hash collision (RV-10) and returns the
// error. Other failures set ReplicaSetCreateError (RV-11, RV-12).
func (sc *syncContext) createReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, stored map[string]any) (created *appsv1.ReplicaSet, existed bool, err error) {
	created, err = sc.create(ctx, rs, stored)
	switch {
	case err == nil:
		sc.logger.V(2).Info("Created new replica set", "replicaSet", klog.KObj(created))
		return created, false, nil
	case apierrors.IsAlreadyExists(err):
		return sc.resolveExistingReplicaSet(ctx, rs, err)
	case runner.IsNamespaceTerminating(err), runner.IsStopping(err):
		return nil, false, err
	}
	msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
	if rolloutstate.HasProgressDeadline(sc.d) {
		setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, ReplicaSetCreateError, msg, sc.now))
		if statusErr := sc.writeStatus(ctx); statusErr != nil {
			sc.logger.Info("Failed to record the replica set create error in status", "err", statusErr)
		}
	}
	sc.c.recorder.Event(sc.d, v1.EventTypeWarning, ReplicaSetCreateError, msg)
	return nil, false, err
}

// resolveExistingReplicaSet handles AlreadyExists for rs (RV-10).
func (sc *syncContext) resolveExistingReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, createErr error) (*appsv1.ReplicaSet, bool, error) {
	existing, err := sc.c.rsLister.ReplicaSets(rs.Namespace).Get(rs.Name)
	if err != nil {
		return nil, false, err
	}
	if owner, ok := ownership.ControllerUID(existing); ok && owner == sc.d.UID && sameTemplate(sc.c.templates, existing, sc.d) {
		return existing, true, nil
	}
	count := int32(0)
	if sc.d.Status.CollisionCount != nil {
		count = *sc.d.Status.CollisionCount
	}
	count++
	sc.d.Status.CollisionCount = &count
	sc.logger.V(2).Info("Found a hash collision for the new replica set", "replicaSet", klog.KObj(existing), "collisionCount", count)
	if err := sc.writeStatus(ctx); err != nil {
		sc.logger.Info("Failed to record the collision count", "err", err)
	}
	return nil, false, createErr
}
