package deployment

import (
	"context"
	"reflect"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// syncStatus is the plain status sync (ST-5): calculateStatus, and
// UpdateStatus unless nothing changed.
func (sc *syncContext) syncStatus(ctx context.Context) error {
	status := calculateStatus(sc.d, sc.f, sc.allRSs(), sc.newRS, sc.now)
	if reflect.DeepEqual(sc.d.Status, status) {
		return nil
	}
	sc.d.Status = status
	return sc.writeStatus(ctx)
}

// syncRolloutStatus writes the rollout status (ST-8, ST-13..ST-15) unless it
// is unchanged, in which case it asks for a delayed requeue to notice a
// progress deadline (ST-16).
func (sc *syncContext) syncRolloutStatus(ctx context.Context) (runner.Result, error) {
	status := rolloutStatus(sc.d, sc.f, sc.partition, sc.allRSs(), sc.newRS, sc.now)
	if err := sc.markComplete(ctx, &status); err != nil { // EX-2
		return runner.Result{}, err
	}
	recorded := recordCompleteRevision(sc.d, sc.allRSs()) // EX-2, written with the status
	if !recorded && reflect.DeepEqual(sc.d.Status, status) {
		after := stuckRequeueAfter(sc.d, &status, sc.now)
		if after > 0 {
			sc.logger.V(4).Info("Requeueing to check the progress deadline", "after", after)
		}
		return runner.Result{RequeueAfter: after}, nil
	}
	prev := sc.d.Status
	sc.d.Status = status
	if err := sc.writeStatus(ctx); err != nil {
		return runner.Result{}, err
	}
	sc.autoRollbackSkippedEvent(&prev, &sc.d.Status) // EX-2
	return runner.Result{}, nil
}
