package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// checkPausedConditions records a pause or resume in the Progressing
// condition (SD-6, ST-18) for Deployments with a progress deadline; it never
// overwrites rolloutstate.ProgressDeadlineExceeded. It returns the status write error.
func (sc *syncContext) checkPausedConditions(ctx context.Context) error {
	if !rolloutstate.HasProgressDeadline(sc.d) {
		return nil
	}
	cond := rolloutstate.Condition(&sc.d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == rolloutstate.ProgressDeadlineExceeded {
		return nil
	}
	pausedRecorded := cond != nil && cond.Reason == DeploymentPaused
	switch {
	case sc.d.Spec.Paused && !pausedRecorded:
		setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, DeploymentPaused, pausedMessage, sc.now))
	case !sc.d.Spec.Paused && pausedRecorded:
		setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, DeploymentResumed, resumedMessage, sc.now))
	default:
		return nil
	}
	return sc.writeStatus(ctx)
}
