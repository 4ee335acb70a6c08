package shard

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memberIndex returns the index of identity in r.Members, or -1.
func (r Ring) memberIndex(identity string) int {
	return slices.IndexFunc(r.Members, func(m Member) bool { return m.Identity == identity })
}

// owns reports whether identity owns a bucket of r.
func (r Ring) owns(identity string) bool {
	return slices.ContainsFunc(r.Buckets, func(b Bucket) bool { return b.Owner == identity })
}

// withoutMember returns r's members without identity (r itself is not changed).
func (r Ring) withoutMember(identity string) []Member {
	return slices.DeleteFunc(slices.Clone(r.Members), func(m Member) bool { return m.Identity == identity })
}

// countMove counts one bucket moved for cause in r.Moves.
func (r *Ring) countMove(cause MoveCause) {
	if r.Moves == nil {
		r.Moves = map[MoveCause]int64{}
	}
	r.Moves[cause]++
}

// markExpired marks identity's member entry Expired at now, if it has one not marked yet; it reports whether
// it changed r.
func (r *Ring) markExpired(identity string, now metav1.MicroTime) bool {
	i := r.memberIndex(identity)
	if i < 0 || r.Members[i].Expired != nil {
		return false
	}
	r.Members[i].Expired = &now
	return true
}

// join writes this replica into the ring's members when it is not there, or is marked expired (it was paused
// past its Lease, and peers took its buckets): from then on, moves towards it are joins for RebalanceInterval
// (SH-8). It reports whether it tried a write.
func (c *Coordinator) join(ctx context.Context, cm *v1.ConfigMap, ring Ring) bool {
	if i := ring.memberIndex(c.cfg.Identity); i >= 0 && ring.Members[i].Expired == nil {
		return false
	}
	next := ring.Clone()
	next.Members = append(next.withoutMember(c.cfg.Identity), Member{Identity: c.cfg.Identity, Joined: metav1.MicroTime{Time: c.now()}})
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "join")
		return true
	}
	c.logger.Info("Joined the shard ring", "members", len(next.Members))
	return true
}

// reapDead finds the first peer (a ring member, or a replica with a Lease) that is not live and whose Lease
// the API server confirms has not changed for a lease duration (ConfirmExpired, SH-7's check), and:
// while it still owns buckets, marks it Expired in the ring, so that `kubedeploy shards` shows it dead
// (its buckets are taken by the plan meanwhile, MoveLeft); once it owns none, deletes its Lease (conditioned
// on the version confirmed) and removes it from the members. It reports whether it tried a ring write.
func (c *Coordinator) reapDead(ctx context.Context, cm *v1.ConfigMap, ring Ring) bool {
	live := c.member.Live()
	candidates := c.member.Peers()
	for _, m := range ring.Members {
		candidates = append(candidates, m.Identity)
	}
	slices.Sort(candidates)
	for _, id := range slices.Compact(candidates) {
		i := ring.memberIndex(id)
		marked := i >= 0 && ring.Members[i].Expired != nil
		if id == c.cfg.Identity || slices.Contains(live, id) || (marked && ring.owns(id)) || !c.member.Silent(id) {
			continue
		}
		if expired, err := c.member.ConfirmExpired(ctx, id); err != nil || !expired {
			if err != nil {
				c.logError(err, "Could not read a shard replica's Lease", "replica", id)
			}
			continue
		}
		return c.reap(ctx, cm, ring, id)
	}
	return false
}

// reap marks the dead replica id Expired while it owns buckets, else deletes its Lease and removes it from the
// ring's members. It reports whether it tried a ring write.
func (c *Coordinator) reap(ctx context.Context, cm *v1.ConfigMap, ring Ring, id string) bool {
	next := ring.Clone()
	if ring.owns(id) {
		if !next.markExpired(id, metav1.MicroTime{Time: c.now()}) {
			return false
		}
		if err := c.writeRing(ctx, cm, next); err != nil {
			c.logWriteError(err, "mark a replica expired")
			return true
		}
		c.logger.Info("A shard replica's Lease expired: its buckets are taken", "replica", id)
		return true
	}
	if err := c.member.DeleteLease(ctx, id); err != nil {
		if !apierrors.IsConflict(err) {
			c.logError(err, "Could not delete an expired shard replica's Lease", "replica", id)
		}
		return false
	}
	if ring.memberIndex(id) < 0 {
		c.logger.Info("Deleted the Lease of a shard replica that expired", "replica", id)
		return false
	}
	next.Members = ring.withoutMember(id)
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "remove an expired replica")
		return true
	}
	c.logger.Info("Removed a shard replica that expired, and deleted its Lease", "replica", id)
	return true
}
