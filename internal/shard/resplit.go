package shard

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultMinResplitInterval is Config.MinResplitInterval's default: a re-split stops every bucket for a few
// seconds, so it is asked for at most this often.
const DefaultMinResplitInterval = 10 * time.Minute

// resplitStep is one round of a re-split under way (Ring.Resplit): release this replica's buckets (stopLost
// has stopped them), else, once no live replica owns a bucket, make the new bounds the ring's.
func (c *Coordinator) resplitStep(ctx context.Context, cm *v1.ConfigMap, ring Ring) {
	next := ring.Clone()
	released := 0
	for i, b := range next.Buckets {
		if b.Owner == c.cfg.Identity {
			next.Buckets[i].Owner, next.Buckets[i].ReleasingTo, next.Buckets[i].ReleaseCause = "", "", ""
			next.Buckets[i].UnownedSince = &metav1.MicroTime{Time: c.now()}
			released++
		}
	}
	if released > 0 {
		if err := c.writeRing(ctx, cm, next); err != nil {
			c.logWriteError(err, "release for a re-split")
			return
		}
		c.logger.Info("Released shard buckets for a re-split", "buckets", released)
		return
	}
	for _, owner := range owners(ring) {
		if expired, err := c.member.ConfirmExpired(ctx, owner); err != nil || !expired {
			return // its owner releases it, or its Lease expires first
		}
	}
	next.Buckets, next.Resplit = next.Resplit, nil
	for i := range next.Buckets {
		next.Buckets[i].UnownedSince = &metav1.MicroTime{Time: c.now()}
	}
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "re-split")
		return
	}
	c.logger.Info("Re-split the shard ring", "buckets", len(next.Buckets))
}

// owners returns the ring's distinct owners, sorted.
func owners(ring Ring) []string {
	var out []string
	for _, b := range ring.Buckets {
		if b.Owner != "" && !slices.Contains(out, b.Owner) {
			out = append(out, b.Owner)
		}
	}
	slices.Sort(out)
	return out
}

// maybeResplit asks for a re-split when the bounds no longer follow the pods (SH-5): the heaviest bucket holds
// more than twice a bucket's share and more than one namespace, the ring is settled (every bucket owned by a
// live replica, none being released), this replica is the live replica with the lowest identity (one asks),
// the last re-split (and this replica's last measure for one) was at least MinResplitInterval ago, and new bounds from a fresh measure cut the heaviest
// bucket by a quarter at least. It reports whether it wrote.
func (c *Coordinator) maybeResplit(ctx context.Context, cm *v1.ConfigMap, ring Ring) bool {
	live := c.member.Live()
	if len(live) == 0 || live[0] != c.cfg.Identity || !settled(ring, live) || !lopsided(ring) {
		return false
	}
	if ring.LastResplit != nil && c.now().Sub(ring.LastResplit.Time) < c.cfg.MinResplitInterval ||
		!c.lastMeasure.IsZero() && c.now().Sub(c.lastMeasure) < c.cfg.MinResplitInterval {
		return false
	}
	c.lastMeasure = c.now()
	pods, err := c.cfg.Measure(ctx)
	if err != nil {
		c.logError(err, "Could not measure the namespaces for a shard re-split")
		return false
	}
	fresh := NewRing(Bounds(pods, len(ring.Buckets)), pods)
	if heaviest(fresh)*4 > heaviest(ring)*3 || sameBounds(fresh, ring) {
		return false
	}
	next := ring.Clone()
	next.Resplit, next.LastResplit = fresh.Buckets, &metav1.MicroTime{Time: c.now()}
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "ask for a re-split")
		return true
	}
	c.logger.Info("Asked for a shard re-split: the buckets' bounds no longer follow the pods", "heaviestPods", heaviest(ring)-1, "afterPods", heaviest(fresh)-1)
	return true
}

// sameBounds reports whether a and b have the same buckets' bounds.
func sameBounds(a, b Ring) bool {
	return slices.EqualFunc(a.Buckets, b.Buckets, func(x, y Bucket) bool { return x.Start == y.Start && x.End == y.End })
}

// settled reports whether every bucket is owned by a live replica and none is being released.
func settled(ring Ring, live []string) bool {
	return !slices.ContainsFunc(ring.Buckets, func(b Bucket) bool { return b.ReleasingTo != "" || !slices.Contains(live, b.Owner) })
}

// minResplitExcess is the least excess of the heaviest bucket over the mean, in pods, worth a re-split: one
// stops every bucket for a few seconds, which a few dozen pods of imbalance do not repay.
const minResplitExcess = 150

// lopsided reports whether the heaviest bucket weighs more than twice the mean, by minResplitExcess pods at
// least, and holds two namespaces or more.
func lopsided(ring Ring) bool {
	total, top := 0, 0
	for i, b := range ring.Buckets {
		total += b.Weight()
		if b.Weight() > ring.Buckets[top].Weight() {
			top = i
		}
	}
	heavy := ring.Buckets[top]
	return heavy.Weight()*len(ring.Buckets) > 2*total && heavy.Weight()*len(ring.Buckets)-total >= minResplitExcess*len(ring.Buckets) &&
		heavy.Namespaces >= 2
}

// heaviest returns the weight of the ring's heaviest bucket.
func heaviest(ring Ring) int {
	w := 0
	for _, b := range ring.Buckets {
		w = max(w, b.Weight())
	}
	return w
}
