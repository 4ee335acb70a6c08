package deployment

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// NewSyncer returns the Deployment controller's sync of one key
// (syncDeployment, SD-1..SD-13) for code that schedules syncs itself, such as
// `kubedeploy rollout plan`'s simulator (internal/simulator): no work queue,
// no event handlers, no sync metrics. cfg is validated as New validates it; its
// informers are used for their caches only and need not run (the caller
// puts objects in their indexers), writes go to cfg.Client, events to
// cfg.Recorder, and cfg.Clock is each sync's now; cfg.Observer and
// cfg.StatusSyncWindow are unused. The caller keeps the caches exact (every
// write of a sync is in them before the next), so the IM-4 guard is cleared
// for the key and never holds a sync back. The sync returns
// Result.RequeueAfter for a progress-deadline check (ST-16) or its error. It
// returns New's errors.
func NewSyncer(cfg Config) (runner.SyncFunc, error) {
	c, err := newController(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
		c.freshness.Forget(key.String())
		return c.syncDeployment(ctx, key)
	}, nil
}
