package manager

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// DefaultConsolidateAfter is how long a replica's buckets stay unchanged before their ControllerSets are merged
// into one (groupRunner).
const DefaultConsolidateAfter = 30 * time.Second

// groupRunner is the shard.Runner of a sharded replica. It runs the replica's buckets in as few ControllerSets
// as it can, so that the replica lists and watches each resource once, whatever the number of buckets it owns
// (issue 35, Scale: each set's watches cost the API server a watcher and, where it does not filter by shard, a
// decode of every event of the cluster):
//
//   - a bucket won starts in a set of its own, so that it syncs at once and nothing else stops (SH-3: its
//     informers start only after the claim, with empty expectations);
//   - once the replica's buckets have stayed the same for quiet, every set is drained (in-flight syncs finish,
//     their claims still valid) and one set over all the buckets starts; its first LIST holds every write the
//     drained sets made;
//   - a bucket stopped (released or lost) stops the whole set it is in, which drains every bucket of the set
//     (SH-3 for the one leaving, a pause for the others), then the others start again in a new set.
//
// Every write of a set passes a fencedTransport that checks the claim of the namespace's own bucket (SH-1,
// SH-2), so a claim revoked while its set drains stops that bucket's writes at once.
type groupRunner struct {
	build func(ctx context.Context, claims []shard.Claim) (bucketSet, error)
	quiet time.Duration
	now   func() time.Time

	// ops serializes the changes of sets: a set is built, started, stopped only under it.
	ops sync.Mutex
	// mu guards the fields below; it is never held across a set's start or stop.
	mu      sync.Mutex
	ctx     context.Context // the coordinator's, from the first Start: sets built later log with it
	of      map[int]*bucketGroup
	leaving map[int]int // buckets whose Stop has been called and has not returned (how many calls)
	changed time.Time   // when a bucket last started or stopped
	looping bool
	// onHeld, if set, is told after each change the number of buckets held (running or starting again) and
	// the ring's number of buckets (0 if no claim says). Called with mu held: it must not call back.
	onHeld func(held, of int)
}

// bucketSet is what groupRunner runs a group of buckets with: a *ControllerSet.
type bucketSet interface {
	Start(ctx context.Context)
	Stop()
	HasSynced() bool
	// podIndexer is the set's pod cache, indexed by namespace.
	podIndexer() cache.Indexer
}

// bucketGroup is one set and the claims it runs; set is nil while it could not be built (retried).
type bucketGroup struct {
	set    bucketSet
	claims []shard.Claim
}

// newGroupRunner returns a groupRunner whose sets build builds (not started), merged after quiet (never when
// quiet ≤ 0).
func newGroupRunner(build func(context.Context, []shard.Claim) (bucketSet, error), quiet time.Duration) *groupRunner {
	return &groupRunner{build: build, quiet: quiet, now: time.Now, of: map[int]*bucketGroup{}, leaving: map[int]int{}}
}

// Start starts bucket c in a ControllerSet of its own (shard.Runner); the error is the set's build.
func (r *groupRunner) Start(ctx context.Context, c shard.Claim) (shard.Running, error) {
	r.ops.Lock()
	defer r.ops.Unlock()
	r.mu.Lock()
	if r.ctx == nil {
		r.ctx = context.WithoutCancel(ctx)
	}
	r.mu.Unlock()
	set, err := r.build(ctx, []shard.Claim{c})
	if err != nil {
		return nil, err
	}
	set.Start(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.of[c.Bucket] = &bucketGroup{set: set, claims: []shard.Claim{c}}
	r.changed = r.now()
	r.publish()
	start := !r.looping
	r.looping = true
	r.mu.Unlock()
	if start {
		go r.consolidateLoop(ctx)
	}
	return bucketHandle{r: r, claim: c}, nil
}

// publish sets kubedeploy_shard_controller_sets to the number of sets running. Call with mu held.
func (r *groupRunner) publish() {
	n := 0
	for _, g := range r.groups() {
		if g.set != nil {
			n++
		}
	}
	shard.MetricControllerSets.Set(float64(n))
	if r.onHeld != nil {
		of := 0
		for _, g := range r.of {
			for _, c := range g.claims {
				of = max(of, c.Of)
			}
		}
		r.onHeld(len(r.of), of)
	}
}

// groups returns the distinct groups, in the order of their first bucket. Call with mu held.
func (r *groupRunner) groups() []*bucketGroup {
	var gs []*bucketGroup
	for _, b := range slices.Sorted(func(yield func(int) bool) {
		for b := range r.of {
			if !yield(b) {
				return
			}
		}
	}) {
		if g := r.of[b]; !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

// StopAll stops the buckets of runs (bucketHandles) together (shard.BatchStopper): each set they run in stops
// once, and only the buckets not stopping start again.
func (r *groupRunner) StopAll(runs []shard.Running) {
	bs := make([]int, 0, len(runs))
	for _, run := range runs {
		bs = append(bs, run.(bucketHandle).claim.Bucket)
	}
	r.stopBuckets(bs)
}

// stopBuckets stops the sets the buckets bs run in, side by side, and starts each set's other buckets again in
// a new set, leaving out those being stopped by another call too; it returns once the sets have stopped, so
// once bs's in-flight syncs have drained (SH-3).
func (r *groupRunner) stopBuckets(bs []int) {
	r.mu.Lock()
	for _, b := range bs {
		r.leaving[b]++
	}
	r.mu.Unlock()
	r.ops.Lock()
	defer r.ops.Unlock()
	r.mu.Lock()
	var gs []*bucketGroup
	for _, b := range bs {
		if g := r.of[b]; g != nil && !slices.Contains(gs, g) {
			gs = append(gs, g) // a bucket with no group was stopped with another bucket of its set
		}
		if r.leaving[b]--; r.leaving[b] == 0 {
			delete(r.leaving, b)
		}
	}
	r.mu.Unlock()
	stopGroups(gs)
	r.mu.Lock()
	var rests [][]shard.Claim
	for _, g := range gs {
		var rest []shard.Claim
		for _, c := range g.claims {
			delete(r.of, c.Bucket)
			if !slices.Contains(bs, c.Bucket) && r.leaving[c.Bucket] == 0 {
				rest = append(rest, c)
			}
		}
		if len(rest) > 0 {
			rests = append(rests, rest)
		}
	}
	r.changed = r.now()
	r.publish()
	ctx := r.ctx
	r.mu.Unlock()
	for _, rest := range rests {
		r.startGroup(ctx, rest)
	}
}

// startGroup builds and starts one set over claims and records it; a set that cannot be built is recorded
// without one, and consolidateLoop tries again. Call with ops held.
func (r *groupRunner) startGroup(ctx context.Context, claims []shard.Claim) {
	g := &bucketGroup{claims: claims}
	set, err := r.build(ctx, claims)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not start the controllers of shard buckets; trying again", "buckets", bucketsOf(claims))
	} else {
		set.Start(ctx)
		g.set = set
	}
	r.mu.Lock()
	for _, c := range claims {
		r.of[c.Bucket] = g
	}
	r.publish()
	r.mu.Unlock()
}

// consolidateLoop merges the sets once the buckets have not changed for quiet (never when quiet ≤ 0), and
// retries sets that could not be built, until ctx ends.
func (r *groupRunner) consolidateLoop(ctx context.Context) {
	every := time.Second
	if r.quiet > 0 {
		every = min(r.quiet/4, every)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.consolidate()
		}
	}
}

// consolidate drains every set and starts one over all their buckets when there are several sets and the
// buckets have not changed for quiet (quiet > 0), or when a group has no set (its build failed).
func (r *groupRunner) consolidate() {
	r.ops.Lock()
	defer r.ops.Unlock()
	r.mu.Lock()
	gs := r.groups()
	unbuilt := slices.ContainsFunc(gs, func(g *bucketGroup) bool { return g.set == nil })
	due := r.quiet > 0 && len(gs) > 1 && r.now().Sub(r.changed) >= r.quiet
	ctx := r.ctx
	r.mu.Unlock()
	if !due && !unbuilt {
		return
	}
	var claims []shard.Claim
	for _, g := range gs {
		claims = append(claims, g.claims...)
	}
	slices.SortFunc(claims, func(a, b shard.Claim) int { return a.Bucket - b.Bucket })
	r.mu.Lock()
	draining := &bucketGroup{claims: claims} // no set: not synced while the old ones drain
	for _, c := range claims {
		r.of[c.Bucket] = draining
	}
	r.mu.Unlock()
	stopGroups(gs)
	klog.FromContext(ctx).Info("Running the shard buckets in one set of controllers", "buckets", bucketsOf(claims), "sets", len(gs))
	r.startGroup(ctx, claims)
}

// stopGroups stops the groups' sets side by side and returns when all have stopped (drained, SH-3).
func stopGroups(gs []*bucketGroup) {
	var wg sync.WaitGroup
	for _, g := range gs {
		if g.set != nil {
			wg.Go(g.set.Stop)
		}
	}
	wg.Wait()
}

// bucketsOf returns the claims' bucket indexes, in order.
func bucketsOf(claims []shard.Claim) []int {
	out := make([]int, len(claims))
	for i, c := range claims {
		out[i] = c.Bucket
	}
	return out
}

// bucketHandle is one bucket of a groupRunner (shard.Running).
type bucketHandle struct {
	r     *groupRunner
	claim shard.Claim
}

// Stop drains the bucket's set and starts its other buckets again (groupRunner.stopBuckets).
func (h bucketHandle) Stop() { h.r.stopBuckets([]int{h.claim.Bucket}) }

// set returns the set the bucket runs in, nil if none.
func (h bucketHandle) set() bucketSet {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	if g := h.r.of[h.claim.Bucket]; g != nil {
		return g.set
	}
	return nil
}

// HasSynced reports whether the bucket's set runs and its caches have synced.
func (h bucketHandle) HasSynced() bool {
	s := h.set()
	return s != nil && s.HasSynced()
}

// Pods counts the cached pods of the bucket's namespaces and those namespaces.
func (h bucketHandle) Pods() (pods, namespaces int) {
	s := h.set()
	if s == nil {
		return 0, 0
	}
	idx := s.podIndexer()
	for _, ns := range idx.ListIndexFuncValues(cache.NamespaceIndex) {
		if !h.claim.Range.Contains(ns) {
			continue
		}
		if objs, err := idx.ByIndex(cache.NamespaceIndex, ns); err == nil && len(objs) > 0 {
			pods += len(objs)
			namespaces++
		}
	}
	return pods, namespaces
}

// Steady counts the steady pods of the bucket's namespaces in its set's caches, and those namespaces
// (shard.Running.Steady, SH-8: steadyOf).
func (h bucketHandle) Steady() (pods, namespaces int) { return steadyOf(h.set(), h.claim.Range) }
