package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// DefaultConsolidateAfter is Sharding.ConsolidateAfter's default. Deprecated: --shard-consolidate-after has no
// effect since a replica runs one set of controllers whatever its buckets (SH-9); it is still accepted.
const DefaultConsolidateAfter = 30 * time.Second

// bucketRunner is the shard.Runner of a sharded replica (SH-3, SH-9). The replica runs one ControllerSet for
// its whole life, over union informers (informerunion); each bucket it wins adds its own informers to those
// unions and its namespaces to the controllers' runner.Scope, and each bucket it gives up takes them away,
// without stopping, draining or re-listing any other bucket:
//
//   - Start: the claim joins the claims writes are checked against (fencedTransport), the bucket's informers
//     start (after the claim was won, so their first LIST holds every write of the previous owner), and once
//     they have synced and the handlers have been given their objects, its namespaces are admitted: the
//     controllers forget what they remember of them (empty expectations), then enqueue each of their
//     Deployments and ReplicaSets once;
//   - Stop: its namespaces stop being admitted (handlers and queues drop their keys), its syncs in flight
//     finish (cancelled only past drainFor), its informers stop and leave the unions (their objects reach
//     the handlers as deletes), and its claim leaves the claims; then the coordinator releases or drops it.
type bucketRunner struct {
	// ctx is the replica's set's: the buckets' informers run under it.
	ctx      context.Context
	scope    *runner.Scope
	newParts func(ctx context.Context, c shard.Claim) (bucketParts, error)
	// drainFor is how long a bucket's syncs in flight may take to finish when it stops before they are
	// cancelled.
	drainFor time.Duration
	// onHeld, if set, is told after each change the number of buckets held (started and not stopped) and the
	// ring's number of buckets (0 if no claim says). Called with mu held: it must not call back.
	onHeld func(held, of int)

	mu      sync.Mutex
	buckets map[int]*runningBucket
	// claims are the claims of buckets, for fencedTransport's every request.
	claims atomic.Pointer[[]shard.Claim]
}

// bucketParts are what runs for one bucket beside the set: its informers, members of the set's unions.
type bucketParts interface {
	// Start starts the informers.
	Start()
	// HasSynced reports whether they have synced and the unions' handlers have been given their objects.
	HasSynced() bool
	// Stop stops them and removes them from the unions; it returns once they have stopped.
	Stop()
	// Pods counts their cached pods and the namespaces those are in.
	Pods() (pods, namespaces int)
	// Steady counts the pods their namespaces hold at rest, and those namespaces (SH-8).
	Steady() (pods, namespaces int)
}

// runningBucket is one bucket started and not yet stopped.
type runningBucket struct {
	claim shard.Claim
	parts bucketParts
	// mu orders its admission against its stop: admitted is set only while stopping is not.
	mu                 sync.Mutex
	admitted, stopping bool
	// cancel ends the wait for its caches; waited is closed once that wait has returned.
	cancel context.CancelFunc
	waited chan struct{}
}

// newBucketRunner returns a bucketRunner whose buckets run under ctx, admitted to scope, each with the parts
// newParts builds, drained for at most drainFor.
func newBucketRunner(ctx context.Context, scope *runner.Scope, newParts func(context.Context, shard.Claim) (bucketParts, error), drainFor time.Duration) *bucketRunner {
	r := &bucketRunner{ctx: ctx, scope: scope, newParts: newParts, drainFor: drainFor, buckets: map[int]*runningBucket{}}
	r.claims.Store(&[]shard.Claim{})
	return r
}

// currentClaims returns the claims of the buckets started and not yet stopped (shardContext.claims).
func (r *bucketRunner) currentClaims() []shard.Claim { return *r.claims.Load() }

// Start starts bucket c (shard.Runner): its claim is checked from now on, its informers start, and its
// namespaces are admitted once they have synced. The error is its parts' build, or c already started.
func (r *bucketRunner) Start(ctx context.Context, c shard.Claim) (shard.Running, error) {
	r.mu.Lock()
	_, running := r.buckets[c.Bucket]
	r.mu.Unlock()
	if running {
		return nil, fmt.Errorf("shard bucket %d started twice", c.Bucket)
	}
	parts, err := r.newParts(r.ctx, c)
	if err != nil {
		return nil, err
	}
	b := &runningBucket{claim: c, parts: parts, waited: make(chan struct{})}
	var wait context.Context
	wait, b.cancel = context.WithCancel(r.ctx)
	r.mu.Lock()
	r.buckets[c.Bucket] = b
	r.publish()
	r.mu.Unlock()
	parts.Start()
	go r.admitWhenSynced(klog.FromContext(ctx), wait, b)
	return bucketHandle{r: r, b: b}, nil
}

// admitWhenSynced admits b's namespaces to the scope once its caches have synced (SH-3), unless it is being
// stopped or ctx ends first.
func (r *bucketRunner) admitWhenSynced(logger klog.Logger, ctx context.Context, b *runningBucket) {
	defer close(b.waited)
	if !cache.WaitForCacheSync(ctx.Done(), b.parts.HasSynced) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping {
		return
	}
	r.scope.Admit(b.claim.Bucket, b.claim.Range.Contains)
	b.admitted = true
	logger.Info("Shard bucket's caches synced; syncing its namespaces", "bucket", b.claim.Bucket, "range", b.claim.Range.String())
}

// publish stores the claims of the buckets and tells onHeld. Call with mu held.
func (r *bucketRunner) publish() {
	claims := make([]shard.Claim, 0, len(r.buckets))
	of := 0
	for _, b := range r.buckets {
		claims = append(claims, b.claim)
		of = max(of, b.claim.Of)
	}
	slices.SortFunc(claims, func(a, b shard.Claim) int { return a.Bucket - b.Bucket })
	r.claims.Store(&claims)
	if r.onHeld != nil {
		r.onHeld(len(claims), of)
	}
}

// StopAll stops the buckets of runs (bucketHandles) side by side and returns once all have stopped
// (shard.BatchStopper).
func (r *bucketRunner) StopAll(runs []shard.Running) {
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(run.Stop)
	}
	wg.Wait()
}

// stop stops b (SH-3): no more admission of its namespaces, their syncs in flight drained, its informers
// stopped and out of the unions, what the controllers remember of its namespaces forgotten, its claim out of
// the claims. Nothing else stops (SH-9).
func (r *bucketRunner) stop(b *runningBucket) {
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	b.cancel()
	<-b.waited
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.drainFor)
	if n := r.scope.Drop(ctx, b.claim.Bucket); n > 0 {
		klog.FromContext(r.ctx).Info("Cancelled syncs of a shard bucket that did not finish in time", "bucket", b.claim.Bucket, "syncs", n, "after", r.drainFor)
	}
	cancel()
	b.parts.Stop()
	r.scope.Forget(b.claim.Range.Contains)
	r.mu.Lock()
	if r.buckets[b.claim.Bucket] == b {
		delete(r.buckets, b.claim.Bucket)
	}
	r.publish()
	r.mu.Unlock()
}

// bucketHandle is one bucket of a bucketRunner (shard.Running).
type bucketHandle struct {
	r *bucketRunner
	b *runningBucket
}

// Stop stops the bucket (bucketRunner.stop) and returns once it has.
func (h bucketHandle) Stop() { h.r.stop(h.b) }

// HasSynced reports whether the bucket's namespaces are admitted: its caches have synced and its keys are
// being synced.
func (h bucketHandle) HasSynced() bool {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	return h.b.admitted && !h.b.stopping
}

// Pods counts the bucket's cached pods and the namespaces they are in.
func (h bucketHandle) Pods() (pods, namespaces int) { return h.b.parts.Pods() }

// Steady counts the steady pods of the bucket's namespaces in its caches, and those namespaces
// (shard.Running.Steady, SH-8).
func (h bucketHandle) Steady() (pods, namespaces int) { return h.b.parts.Steady() }
