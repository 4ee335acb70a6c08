package replicaset

import (
	"context"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// NewSyncer returns the ReplicaSet controller's sync of one key (RS-1..RS-15:
// slow start, the burst limit, RS-14's victim ranking, status) for code that
// schedules syncs itself, such as `kubedeploy rollout plan`'s simulator
// (internal/simulator): no work queue and no event handlers. cfg is
// validated and defaulted as New does it; its informers are used for their
// caches only and need not run (the caller puts objects in their indexers),
// writes go to cfg.Client, events to cfg.Recorder, and cfg.Clock is each
// sync's now; cfg.Observer and cfg.StatusSyncWindow are unused.
//
// The controller learns of its own pod creations and deletions from
// informer events, which nothing delivers here; the caller keeps the caches
// exact instead (every write of a sync is in them before the next), so the
// key's expectations and IM-4 guard are cleared before each sync. The sync
// returns Result.RequeueAfter for when a Ready pod becomes available
// (RS-15) or its error. It returns New's errors.
func NewSyncer(cfg Config) (runner.SyncFunc, error) {
	c, err := newController(cfg)
	if err != nil {
		return nil, err
	}
	return c.syncCleared, nil
}

// syncCleared is sync after clearing key's expectations and IM-4 guard (see NewSyncer).
func (c *Controller) syncCleared(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
	c.expectations.DeleteExpectations(klog.FromContext(ctx), key.String())
	c.freshness.Forget(key.String())
	return c.sync(ctx, key)
}
