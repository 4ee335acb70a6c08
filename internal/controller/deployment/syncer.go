package deployment

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Syncer runs the Deployment controller's sync of one key against caches
// its caller fills, with no work queue, no event handlers and no metrics:
// the entry point for code that drives the controller's decisions itself,
// such as `kubedeploy rollout plan`'s simulator (internal/simulator). Every
// decision is the controller's own (syncDeployment, SD-1..SD-13); only the
// scheduling of syncs is the caller's.
type Syncer struct{ c *Controller }

// NewSyncer builds a Syncer from cfg, validated as New validates it. The
// informers in cfg are used for their caches only and need not run: the
// caller puts objects in their indexers. Writes go to cfg.Client, events to
// cfg.Recorder; cfg.Clock is the sync's now. cfg.Observer and
// cfg.StatusSyncWindow are unused. It returns New's errors.
func NewSyncer(cfg Config) (*Syncer, error) {
	c, err := newController(cfg)
	if err != nil {
		return nil, err
	}
	return &Syncer{c: c}, nil
}

// Sync runs one sync of the Deployment key and returns how long after it the
// controller asks to sync the key again (0: only on a change; a progress
// deadline check otherwise, ST-16) or the sync's error (retried with
// backoff by the controller). The caller keeps the caches exact: every
// write of an earlier Sync is in them before the next, so the IM-4 guard
// never waits.
func (s *Syncer) Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	s.c.freshness.Forget(key.String())
	res, err := s.c.syncDeployment(ctx, key)
	return res.RequeueAfter, err
}
