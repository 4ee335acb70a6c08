package shard

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// reconcile is one round of the coordinator: stop what it may no longer run, then at most one ring write
// (join the members, accept what it owns, finish its release, make the plan's next move, reap a dead peer,
// or refresh its buckets' steady pods).
func (c *Coordinator) reconcile(ctx context.Context) {
	epoch := c.member.Epoch()
	if epoch == 0 {
		c.stopAll(true, "membership lapsed or not yet renewed")
		return
	}
	cm, ring, err := c.readRing()
	if err != nil {
		c.stopAll(true, "the ring cannot be read")
		return
	}
	if cm == nil {
		if err := c.createRing(ctx); err != nil && !errors.Is(err, context.Canceled) {
			c.logger.Error(err, "Could not create the shard ring")
		}
		return
	}
	c.stopLost(ring, epoch)
	c.observeOwners(ring)
	if c.join(ctx, cm, ring) {
		return
	}
	if ring.Resplitting() {
		c.resplitStep(ctx, cm, ring)
		return
	}
	if c.accept(ctx, cm, ring, epoch) || c.finishRelease(ctx, cm, ring) || c.move(ctx, cm, ring, epoch) || c.reapDead(ctx, cm, ring) {
		return
	}
	if !c.refreshWeights(ctx, cm, ring) {
		c.maybeResplit(ctx, cm, ring)
	}
}

// DefaultWeightRefreshInterval is Config.WeightRefreshInterval's default: the least time between two rewrites
// of this replica's buckets' steady pods in the ring.
const DefaultWeightRefreshInterval = time.Minute

// maxCountInterval bounds the time between two countings of this replica's buckets' cached and steady pods
// (refreshWeights; the interval is Config.WeightRefreshInterval when that is shorter). A counting walks every
// cached pod, and the coordinator reconciles every RetryPeriod and at each Lease renewal of every replica:
// counting at each round cost a sharded replica about 6% of its CPU during a 10,000-pod rollout (issue 45).
const maxCountInterval = 10 * time.Second

// refreshWeights publishes the cached pods and namespaces of the buckets this replica runs, and, when one
// bucket's steady pods (Running.Steady: a rollout's surge left out, SH-8) differ from the ring's by more than
// a fifth (and 10 pods), rewrites its buckets' counts in the ring (at most once per Config.WeightRefreshInterval), so
// that the plan spreads pods, not buckets (SH-5). A ring whose counts hold costs no write (SH-6). It counts at
// most once per maxCountInterval (or WeightRefreshInterval, if shorter) and reports whether it tried a write.
func (c *Coordinator) refreshWeights(ctx context.Context, cm *v1.ConfigMap, ring Ring) bool {
	if c.now().Sub(c.lastCount) < min(maxCountInterval, c.cfg.WeightRefreshInterval) {
		return false
	}
	c.lastCount = c.now()
	counts := map[int][2]int{}
	totalPods, totalNamespaces, steadyPods := 0, 0, 0
	c.mu.Lock()
	for i, run := range c.running {
		if run.running.HasSynced() {
			pods, nss := run.running.Pods()
			totalPods, totalNamespaces = totalPods+pods, totalNamespaces+nss
			steady, steadyNss := run.running.Steady()
			counts[i] = [2]int{steady, steadyNss}
			steadyPods += steady
		}
	}
	c.mu.Unlock()
	metricCachedPods.Set(float64(totalPods))
	metricCachedNamespaces.Set(float64(totalNamespaces))
	stale := false
	for i, n := range counts {
		if d := abs(n[0] - ring.Buckets[i].Pods); d > 10 && d*5 > ring.Buckets[i].Pods {
			stale = true
		}
	}
	if !stale || c.now().Sub(c.lastRefresh) < c.cfg.WeightRefreshInterval {
		return false
	}
	next := ring.Clone()
	for i, n := range counts {
		next.Buckets[i].Pods, next.Buckets[i].Namespaces = n[0], n[1]
	}
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "pods")
		return true
	}
	c.lastRefresh = c.now()
	c.logger.V(2).Info("Updated the steady pods of this replica's shard buckets", "buckets", len(counts), "pods", steadyPods)
	return true
}

// observeOwners starts the clock on owners and members this replica has not seen a Lease of, and publishes
// the gauges.
func (c *Coordinator) observeOwners(ring Ring) {
	known := make([]string, 0, len(ring.Buckets)+len(ring.Members))
	for _, b := range ring.Buckets {
		known = append(known, b.Owner)
	}
	for _, m := range ring.Members {
		known = append(known, m.Identity)
	}
	c.member.Known(known...)
	ownedBuckets, ownedPods := 0, 0
	for _, b := range ring.Buckets {
		if b.Owner == c.cfg.Identity {
			ownedBuckets++
			ownedPods += b.Pods
		}
	}
	c.owned.Store(int64(ownedBuckets))
	metricOwnedBuckets.Set(float64(ownedBuckets))
	metricRingPods.Set(float64(ownedPods))
}

// stopLost stops every bucket this replica runs but may not: being released or re-split (drained, SH-3), or no
// longer its own, bounds changed, or claimed in an older epoch (cut, SH-2).
func (c *Coordinator) stopLost(ring Ring, epoch int64) {
	var drained, cut []int
	c.mu.Lock()
	for i, run := range c.running {
		switch {
		case i >= len(ring.Buckets) || ring.Buckets[i].Owner != c.cfg.Identity || ring.Buckets[i].Range() != run.rng || run.epoch != epoch:
			cut = append(cut, i)
		case ring.Buckets[i].ReleasingTo != "" || ring.Resplitting():
			drained = append(drained, i)
		}
	}
	c.mu.Unlock()
	c.stop(cut, true, "no longer this replica's to run")
	c.stop(drained, false, "handing over")
}

// stopAll stops every bucket this replica runs: cut when it may no longer act, drained when it still owns them
// (shutting down, before it releases them).
func (c *Coordinator) stopAll(cut bool, why string) {
	c.mu.Lock()
	all := make([]int, 0, len(c.running))
	for i := range c.running {
		all = append(all, i)
	}
	c.mu.Unlock()
	c.stop(all, cut, why)
}

// stop stops the buckets side by side (each stops enqueuing, finishes its in-flight syncs and stops its
// informers) and returns when all have stopped. Cut revokes their fences first, so that nothing more is
// written (the claim is gone); otherwise in-flight syncs finish their writes and the fences are revoked after
// (a drain before a release, SH-3).
func (c *Coordinator) stop(buckets []int, cut bool, why string) {
	if len(buckets) == 0 {
		return
	}
	c.mu.Lock()
	runs := make([]*bucketRun, 0, len(buckets))
	for _, i := range buckets {
		run := c.running[i]
		if cut {
			run.fence.Revoke()
		}
		runs = append(runs, run)
		delete(c.running, i)
	}
	c.mu.Unlock()
	if batch, ok := c.cfg.Runner.(BatchStopper); ok {
		rs := make([]Running, len(runs))
		for i, run := range runs {
			rs[i] = run.running
		}
		batch.StopAll(rs)
		for _, run := range runs {
			run.fence.Revoke()
		}
	} else {
		var wg sync.WaitGroup
		for _, run := range runs {
			wg.Go(func() {
				run.running.Stop()
				run.fence.Revoke()
			})
		}
		wg.Wait()
	}
	slices.Sort(buckets)
	c.logger.Info("Stopped shard buckets", "buckets", buckets, "reason", why, "cut", cut)
	metricRunningBuckets.Set(float64(c.runningCount()))
}

func (c *Coordinator) runningCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running)
}

// accept claims, with one conditional write, every bucket the ring gives this replica that it does not run
// (handed to it, or its own from before a lapse: SH-2's "won a claim again"), then starts them. It reports
// whether it tried a write.
func (c *Coordinator) accept(ctx context.Context, cm *v1.ConfigMap, ring Ring, epoch int64) bool {
	var pending []int
	c.mu.Lock()
	for i, b := range ring.Buckets {
		if _, ok := c.running[i]; !ok && b.Owner == c.cfg.Identity && b.ReleasingTo == "" {
			pending = append(pending, i)
		}
	}
	c.mu.Unlock()
	if len(pending) == 0 {
		return false
	}
	next := ring.Clone()
	for _, i := range pending {
		next.Buckets[i].Claims++
		next.Buckets[i].UnownedSince = nil
	}
	if c.claim(ctx, cm, next, epoch, "accepted") {
		for _, i := range pending {
			metricHandovers.WithLabelValues("accepted").Inc()
			c.observeUnowned(ring.Buckets[i].UnownedSince, time.Time{})
			c.start(ctx, i, ring.Buckets[i].Range(), len(ring.Buckets), epoch)
		}
	}
	return true
}

// claim writes next and reports whether it is a claim won in epoch (written, and the epoch still current).
func (c *Coordinator) claim(ctx context.Context, cm *v1.ConfigMap, next Ring, epoch int64, how string) bool {
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, how)
		return false
	}
	if c.member.Epoch() != epoch {
		c.logger.Info("Membership lapsed during a shard claim; it is claimed again", "how", how)
		return false
	}
	return true
}

// logError logs err with msg and keysAndValues as an error, or at V(2) when it is this replica's own shutdown
// cutting the request short (context canceled): stopping is not a failure.
func (c *Coordinator) logError(err error, msg string, keysAndValues ...any) {
	if errors.Is(err, context.Canceled) {
		c.logger.V(2).Info(msg+" (shutting down)", append(keysAndValues, "err", err)...)
		return
	}
	c.logger.Error(err, msg, keysAndValues...)
}

// logWriteError logs a failed ring write: a conflict (another replica wrote first) and a write cut short by this
// replica's own shutdown (context canceled) at V(2), anything else as an error.
func (c *Coordinator) logWriteError(err error, what string) {
	switch {
	case apierrors.IsConflict(err):
		c.logger.V(2).Info("The shard ring changed first; reading it again", "write", what)
	case errors.Is(err, context.Canceled):
		c.logger.V(2).Info("A shard ring write was cut short by shutting down", "write", what)
	default:
		c.logger.Error(err, "Could not write the shard ring", "write", what)
	}
}

// start starts bucket i (of a ring of `of`) with a fresh fence of epoch; a build error is logged and retried
// next round.
func (c *Coordinator) start(ctx context.Context, i int, rng Range, of int, epoch int64) {
	fence := NewFenceUntil(func() time.Time { return c.claimValidUntil(epoch) }, c.now)
	running, err := c.cfg.Runner.Start(ctx, Claim{Bucket: i, Range: rng, Of: of, Fence: fence})
	if err != nil {
		c.logError(err, "Could not start a shard bucket", "bucket", i, "range", rng.String())
		return
	}
	c.mu.Lock()
	c.running[i] = &bucketRun{rng: rng, epoch: epoch, fence: fence, running: running}
	n := len(c.running)
	c.mu.Unlock()
	c.logger.Info("Started shard bucket", "bucket", i, "range", rng.String(), "epoch", epoch)
	metricRunningBuckets.Set(float64(n))
}

// finishRelease completes this replica's release (stopLost has stopped the bucket): the bucket goes to the
// replica it is released to if that one is live, else the release is called off. It reports whether it tried
// a write.
func (c *Coordinator) finishRelease(ctx context.Context, cm *v1.ConfigMap, ring Ring) bool {
	i := slices.IndexFunc(ring.Buckets, func(b Bucket) bool { return b.Owner == c.cfg.Identity && b.ReleasingTo != "" })
	if i < 0 {
		return false
	}
	next := ring.Clone()
	b := &next.Buckets[i]
	to, cause := b.ReleasingTo, cmp.Or(b.ReleaseCause, MoveRebalance)
	if slices.Contains(c.member.Live(), to) {
		b.Owner, b.UnownedSince = to, &metav1.MicroTime{Time: c.now()}
		next.countMove(cause)
	}
	b.ReleasingTo, b.ReleaseCause = "", ""
	if err := c.writeRing(ctx, cm, next); err != nil {
		c.logWriteError(err, "release")
		return true
	}
	if b.Owner == to {
		metricHandovers.WithLabelValues("released").Inc()
		metricMoves.WithLabelValues(string(cause)).Inc()
		c.logger.Info("Released shard bucket", "bucket", i, "to", to, "cause", cause)
	} else {
		c.logger.Info("Called off a shard bucket release: the replica is gone", "bucket", i, "to", to)
	}
	return true
}

// move makes the plan's next move if it is this replica's: take a bucket (after confirming from the API
// server that its owner's Lease expired) or start releasing one (a rebalance stamps Ring.LastRebalance, SH-8).
// It reports whether the move was this replica's.
func (c *Coordinator) move(ctx context.Context, cm *v1.ConfigMap, ring Ring, epoch int64) bool {
	m := Next(ring, c.member.Live(), c.now())
	switch {
	case m.Kind == Take && m.To == c.cfg.Identity:
		c.take(ctx, cm, ring, m, epoch)
		return true
	case m.Kind == Release && m.From == c.cfg.Identity:
		next := ring.Clone()
		next.Buckets[m.Bucket].ReleasingTo, next.Buckets[m.Bucket].ReleaseCause = m.To, m.Cause
		if m.Cause == MoveRebalance {
			next.LastRebalance = &metav1.MicroTime{Time: c.now()}
		}
		if err := c.writeRing(ctx, cm, next); err != nil {
			c.logWriteError(err, "start release")
			return true
		}
		c.logger.Info("Releasing shard bucket", "bucket", m.Bucket, "to", m.To, "cause", m.Cause)
		return true
	}
	return false
}

// take claims an unowned bucket, or one whose owner's Lease the API server confirms expired (SH-7, marking
// that owner Expired among the members in the same write), and starts it.
func (c *Coordinator) take(ctx context.Context, cm *v1.ConfigMap, ring Ring, m Move, epoch int64) {
	var lastSeen time.Time
	if m.From != "" {
		expired, err := c.member.ConfirmExpired(ctx, m.From)
		if err != nil || !expired {
			if err != nil {
				c.logError(err, "Could not read a shard replica's Lease", "replica", m.From)
			}
			return
		}
		lastSeen = c.member.LastSeen(m.From)
	}
	next := ring.Clone()
	b := &next.Buckets[m.Bucket]
	b.Owner, b.ReleasingTo, b.ReleaseCause, b.UnownedSince = c.cfg.Identity, "", "", nil
	b.Claims++
	next.countMove(m.Cause)
	if m.From != "" {
		next.markExpired(m.From, metav1.MicroTime{Time: c.now()})
	}
	if !c.claim(ctx, cm, next, epoch, "take") {
		return
	}
	c.logger.Info("Took shard bucket", "bucket", m.Bucket, "from", m.From, "cause", m.Cause)
	metricHandovers.WithLabelValues("taken").Inc()
	metricMoves.WithLabelValues(string(m.Cause)).Inc()
	c.observeUnowned(ring.Buckets[m.Bucket].UnownedSince, lastSeen)
	c.start(ctx, m.Bucket, b.Range(), len(next.Buckets), epoch)
}

// observeUnowned records how long a bucket went unowned: since it was released, or since its dead owner's
// Lease last changed.
func (c *Coordinator) observeUnowned(since *metav1.MicroTime, lastSeen time.Time) {
	switch {
	case since != nil:
		metricUnownedSeconds.Observe(c.now().Sub(since.Time).Seconds())
	case !lastSeen.IsZero():
		metricUnownedSeconds.Observe(c.now().Sub(lastSeen).Seconds())
	}
}

// leave stops every bucket, releases this replica's buckets in the ring (Owner ""), and deletes its Lease, so
// peers take the buckets at once. It gives up after RenewDeadline; peers then wait for the Lease to expire.
func (c *Coordinator) leave(ctx context.Context) {
	c.stopAll(false, "shutting down")
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Durations.RenewDeadline)
	defer cancel()
	for ctx.Err() == nil {
		err := c.releaseAll(ctx)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			c.logger.Error(err, "Could not release the shard buckets; peers take them when the Lease expires")
			return
		}
	}
	if err := c.member.Leave(ctx); err != nil {
		c.logger.Error(err, "Could not delete the shard membership Lease; it expires by itself")
	}
	c.logger.Info("Left the shard ring", "ring", klog.KRef(c.cfg.Namespace, c.cfg.RingName))
}

// releaseAll reads the ring from the API server and writes it with this replica's buckets unowned and itself
// out of the members.
func (c *Coordinator) releaseAll(ctx context.Context) error {
	cm, err := c.cfg.Client.CoreV1().ConfigMaps(c.cfg.Namespace).Get(ctx, c.cfg.RingName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ring, err := DecodeRing(cm)
	if err != nil {
		return err
	}
	next, changed := ring.Clone(), ring.memberIndex(c.cfg.Identity) >= 0
	next.Members = ring.withoutMember(c.cfg.Identity)
	for i, b := range next.Buckets {
		if b.Owner == c.cfg.Identity {
			next.Buckets[i].Owner, next.Buckets[i].ReleasingTo, next.Buckets[i].ReleaseCause = "", "", ""
			next.Buckets[i].UnownedSince = &metav1.MicroTime{Time: c.now()}
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.writeRing(ctx, cm, next)
}
