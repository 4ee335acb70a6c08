package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// rollback rolls d back to the revision in rolloutstate.RollbackToAnnotation (section 6,
// RB-2..RB-8): it ensures the new ReplicaSet exists, finds the target
// ReplicaSet, copies its template and annotations into d and clears the
// annotation, in one patch of d. It writes no status.
func (sc *syncContext) rollback(ctx context.Context) error {
	if err := sc.ensureNewReplicaSet(ctx); err != nil {
		return err
	}
	target, _ := rollbackTo(sc.d)
	all := sc.allRSs()
	if target == 0 {
		target = lastRevision(all)
		if target == 0 {
			sc.c.recorder.Event(sc.d, v1.EventTypeWarning, RollbackRevisionNotFound, "Unable to find last revision.")
			return sc.clearRollbackTo(ctx)
		}
	}
	for _, rs := range all {
		v, err := revision(rs)
		if err != nil || v != target {
			continue
		}
		return sc.rollbackToReplicaSet(ctx, rs, target)
	}
	sc.c.recorder.Event(sc.d, v1.EventTypeWarning, RollbackRevisionNotFound, "Unable to find the revision to rollback to.")
	return sc.clearRollbackTo(ctx)
}

// rollbackToReplicaSet copies rs's template (without pod-template-hash) and
// annotations into d when they differ (RB-5, RB-6), or reports an unchanged
// template (RB-7); the same patch clears the annotation.
func (sc *syncContext) rollbackToReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, target int64) error {
	if sameTemplate(sc.c.templates, rs, sc.d) {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, RollbackTemplateUnchanged,
			"The rollback revision contains the same template as current deployment %q", sc.d.Name)
		return sc.clearRollbackTo(ctx)
	}
	err := sc.patchDeploymentToTemplateOf(ctx, rs, func(d *appsv1.Deployment) {
		d.Annotations = rollbackAnnotations(d, rs)
		delete(d.Annotations, rolloutstate.RollbackToAnnotation)
	})
	if err != nil {
		return fmt.Errorf("rolling back to revision %d: %w", target, err)
	}
	sc.c.recorder.Eventf(sc.d, v1.EventTypeNormal, RollbackDone, "Rolled back deployment %q to revision %d", sc.d.Name, target)
	return nil
}

// clearRollbackTo removes rolloutstate.RollbackToAnnotation from d with a patch (RB-3,
// RB-4, RB-7), continuing from the returned object (IM-2).
func (sc *syncContext) clearRollbackTo(ctx context.Context) error {
	err := sc.patchDeployment(ctx, func(d *appsv1.Deployment) { delete(d.Annotations, rolloutstate.RollbackToAnnotation) })
	if err != nil {
		return fmt.Errorf("clearing rollback annotation: %w", err)
	}
	return nil
}
