package replicaset

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Syncer runs the ReplicaSet controller's sync of one key against caches its
// caller fills, with no work queue and no event handlers: the entry point
// for code that drives the controller's decisions itself, such as `kubedeploy
// rollout plan`'s simulator (internal/simulator). Every decision is the
// controller's own (RS-1..RS-15: slow start, the burst limit, RS-14's victim
// ranking, status); only the scheduling of syncs is the caller's.
type Syncer struct{ c *Controller }

// NewSyncer builds a Syncer from cfg, validated and defaulted as New does.
// The informers in cfg are used for their caches only and need not run: the
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

// Sync runs one sync of the ReplicaSet key and returns how long after it the
// controller asks to sync the key again (0: only on a change; otherwise when
// a Ready pod becomes available, RS-15) or the sync's error. The caller
// keeps the caches exact: every write of an earlier Sync is in them before
// the next, so the expectations and the IM-4 guard are cleared for key and
// never hold a sync back (the controller learns of its own writes from
// informer events, which a Syncer has none of).
func (s *Syncer) Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	s.c.expectations.DeleteExpectations(klog.FromContext(ctx), key.String())
	s.c.freshness.Forget(key.String())
	res, err := s.c.sync(ctx, key)
	return res.RequeueAfter, err
}
