package manager

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/serving"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// DefaultShardBuckets is Sharding.Buckets' default: 12 divides evenly among 1, 2, 3, 4 and 6 replicas, so
// buckets of equal pods (SH-5) give each of them the same share (16 left 3 replicas at 6/5/5 buckets, the
// biggest with 1.125× the mean), and a replica's watches stay few (each bucket it holds has its own three
// informers, a watch each: bucketInformers).
const DefaultShardBuckets = 12

// Sharding configures the sharded mode (issue 35, SH-1…SH-7): every replica is active and runs the
// controllers only for the namespaces of the buckets it owns. It uses LeaderElection's durations, namespace
// and identity for its per-replica Lease, in place of the single leader Lease.
type Sharding struct {
	// Enabled turns the sharded mode on (--sharding).
	Enabled bool
	// Buckets is the number of buckets of a ring this replica creates (1..1024, default DefaultShardBuckets);
	// a ring that exists keeps its own.
	Buckets int
	// RingName names the ring's ConfigMap (default shard.DefaultRingName), in LeaderElection.ResourceNamespace.
	RingName string
	// LeaderLease is the Lease, "NAMESPACE/NAME", that a leader-elected (unsharded) kubedeploy controllers holds
	// (its LeaderElection.ResourceNamespace/ResourceName; default DefaultResourceNamespace/DefaultResourceName).
	// The sharded replicas hold it together while they run, and wait while a leader holds it, so that the two
	// modes never run at once (SH-10). "-" turns that off.
	LeaderLease string
	// ConsolidateAfter is accepted and ignored. Deprecated: a replica runs one set of controllers whatever its
	// buckets, each bucket with informers of its own that no move of another bucket restarts (SH-9); there is
	// nothing to merge (--shard-consolidate-after is a documented no-op).
	ConsolidateAfter time.Duration
}

// Default fills zero fields.
func (s *Sharding) Default() {
	s.Buckets = cmp.Or(s.Buckets, DefaultShardBuckets)
	s.RingName = cmp.Or(s.RingName, shard.DefaultRingName)
	s.LeaderLease = cmp.Or(s.LeaderLease, DefaultResourceNamespace+"/"+DefaultResourceName)
	s.ConsolidateAfter = cmp.Or(s.ConsolidateAfter, DefaultConsolidateAfter)
}

// Validate returns an error for a bucket count outside 1..1024, or a LeaderLease that is neither "-" nor
// NAMESPACE/NAME.
func (s Sharding) Validate() error {
	if !s.Enabled {
		return nil
	}
	if s.Buckets < 1 || s.Buckets > 1024 {
		return fmt.Errorf("shard buckets must be between 1 and 1024, got %d", s.Buckets)
	}
	if ns, name, ok := strings.Cut(s.LeaderLease, "/"); s.LeaderLease != "" && s.LeaderLease != "-" && (!ok || ns == "" || name == "" || strings.Contains(name, "/")) {
		return fmt.Errorf("the shard leader Lease must be NAMESPACE/NAME or \"-\", got %q", s.LeaderLease)
	}
	return nil
}

// shardContext is what a sharded replica's one ControllerSet is built with (SH-9): the claims of the buckets it
// runs now (each claim's fence guards the writes into its namespaces; bucketRunner.currentClaims), the
// controllers' scope (the namespaces they act on now, runner.Scope), and the rate limiters and sync slots
// per controller.
type shardContext struct {
	claims   func() []shard.Claim
	scope    *runner.Scope
	limiters *sharedLimiters
	slots    *sharedSlots
}

// scopeFor is the controllers' runner.Scope in sharded mode, nil (every namespace) otherwise.
func (c Config) scopeFor() *runner.Scope {
	if c.shard == nil {
		return nil
	}
	return c.shard.scope
}

// sharedSlots is one runner.Slots per controller name for the whole process: no more syncs run at once in the
// process than its share of the configured number (when each bucket had controllers of its own, a replica with
// 8 buckets ran 8 × --concurrent-*-syncs syncs behind one client rate limiter, and decisions landed seconds
// late: EX-3's pod bound was overrun in tests).
//
// --concurrent-*-syncs (CM-1) are the fleet's in sharded mode (issue 35): a replica holding held of the
// ring's of buckets runs max(1, ⌊n × held ÷ of⌋) syncs at once, so that N replicas together run no more
// syncs, and write no more often, than one replica would (at least one each). Each replica at the full n made
// a rollout take more, smaller steps: 3 replicas at 5 each wrote 34,105 times where one wrote 28,985, and on
// a 2-core machine whose API server was the bottleneck the rollout took 1.45 times as long (bench -mode
// shards, 3,000 pods, 2026-11-27).
type sharedSlots struct {
	mu     sync.Mutex
	logger klog.Logger
	by     map[string]*runner.Slots
	// configured is each controller's --concurrent-*-syncs; held and of the replica's share of the ring.
	configured map[string]int
	held, of   int
}

// share is n syncs divided by the replica's share of the ring: max(1, ⌊n × held ÷ of⌋), n itself while the
// share is not known. Call with mu held.
func (s *sharedSlots) share(n int) int {
	if s.of <= 0 || s.held <= 0 || s.held >= s.of {
		return n
	}
	return max(1, n*s.held/s.of)
}

// resize sets every controller's bound for a replica holding held of the ring's of buckets (bucketRunner's
// onHeld).
func (s *sharedSlots) resize(held, of int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held == s.held && of == s.of {
		return
	}
	s.held, s.of = held, of
	limits := map[string]int{}
	for name, slots := range s.by {
		limits[name] = s.share(s.configured[name])
		slots.SetLimit(limits[name])
	}
	s.logger.V(2).Info("Syncs at once follow this replica's share of the ring", "buckets", held, "of", of, "limits", limits)
}

// slotsFor returns the Slots of the named controller in a sharded set, nil otherwise.
func (c Config) slotsFor(controller string, workers int) *runner.Slots {
	if c.shard == nil {
		return nil
	}
	return c.shard.slots.get(controller, workers)
}

// get returns the process's Slots of the named controller, made for `workers` (its --concurrent-*-syncs,
// divided by the replica's share) the first time.
func (s *sharedSlots) get(controller string, workers int) *runner.Slots {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by, s.configured = map[string]*runner.Slots{}, map[string]int{}
	}
	if _, ok := s.by[controller]; !ok {
		s.by[controller], s.configured[controller] = runner.NewSlots(s.share(workers)), workers
	}
	return s.by[controller]
}

// sharedLimiters is one token bucket per controller name for the whole process.
type sharedLimiters struct {
	mu sync.Mutex
	by map[string]flowcontrol.RateLimiter
}

func (l *sharedLimiters) get(name string, qps float32, burst int) flowcontrol.RateLimiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]flowcontrol.RateLimiter{}
	}
	if _, ok := l.by[name]; !ok {
		l.by[name] = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	return l.by[name]
}

// applyShard sets the process's shared rate limiter and the fence on cfg: each request is checked against the
// claims of the buckets the replica runs when it is sent (liveFence).
func (s *shardContext) applyShard(cfg *rest.Config, controller string, qps float32, burst int) {
	cfg.RateLimiter = s.limiters.get(controller, qps, burst)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return liveFence{next: rt, claims: s.claims}
	})
}

// liveFence is fencedTransport over the claims of the moment: a replica's one set of controllers (SH-9) writes
// into the namespaces of the buckets it runs when each request is sent, with their claims valid.
type liveFence struct {
	next   http.RoundTripper
	claims func() []shard.Claim
}

func (t liveFence) RoundTrip(req *http.Request) (*http.Response, error) {
	return fencedTransport{next: t.next, claims: t.claims()}.RoundTrip(req)
}

// runSharded runs cfg's controllers in sharded mode until ctx ends: it probes whether the API server filters
// by shard, starts the replica's one ControllerSet over union informers (shardedReplica, SH-9), then, while the
// sharded replicas hold the leader Lease (SH-10, modeLease; always with LeaderLease "-"), runs a
// shard.Coordinator whose buckets come and go in that set (bucketRunner). While a leader-elected process holds
// that Lease it waits, writing nothing, and other says so. The set stops only after the coordinator has drained
// and released every bucket. The error is a client's, a controller's, or the coordinator's informers'.
func runSharded(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck, other *otherMode) error {
	logger := klog.FromContext(ctx)
	client, err := cfg.clientFor("shard-coordinator")
	if err != nil {
		return err
	}
	replica, err := startShardedReplica(ctx, cfg, probeShardFiltering(ctx, client))
	if err != nil {
		return err
	}
	defer replica.stop()
	if cfg.Sharding.LeaderLease == "-" {
		_, err := runCoordinatorOnce(ctx, cfg, client, replica.buckets, syncCheck, nil)
		return err
	}
	mode, err := newModeLease(cfg.Sharding.LeaderLease, cfg.LeaderElection.ResourceNamespace, cfg.Sharding.RingName, cfg.LeaderElection, client, other)
	if err != nil {
		return err
	}
	for {
		if err := mode.waitHeld(ctx); err != nil {
			return nil // ctx ended while waiting
		}
		logger.Info("The sharded replicas hold the leader Lease; starting", "lease", cfg.Sharding.LeaderLease)
		runCtx, stop := context.WithCancel(ctx)
		go mode.keep(runCtx, stop)
		coord, err := runCoordinatorOnce(runCtx, cfg, client, replica.buckets, syncCheck, mode.HeldUntil)
		stop()
		if err != nil || ctx.Err() != nil {
			releaseIfLast(ctx, mode, coord)
			return err
		}
	}
}

// shardedReplica is a sharded replica's one ControllerSet, started, and the shard.Runner of its buckets.
type shardedReplica struct {
	set     *shardedSet
	buckets *bucketRunner
	cancel  context.CancelFunc
}

// startShardedReplica builds and starts the replica's ControllerSet (shardedSet) over no bucket yet, with a
// bucketRunner whose buckets run in it; serverSide says whether the API server filters by shard. The set runs
// until stop, whatever ctx does (it outlives the coordinators, which drain their buckets when ctx ends). The
// error is the set's build.
func startShardedReplica(ctx context.Context, cfg Config, serverSide bool) (*shardedReplica, error) {
	setCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	buckets := newBucketRunner(setCtx, runner.NewScope(), nil, cfg.LeaderElection.RenewDeadline)
	setCfg := cfg
	setCfg.shard = &shardContext{claims: buckets.currentClaims, scope: buckets.scope, limiters: &sharedLimiters{},
		slots: &sharedSlots{logger: klog.FromContext(ctx)}}
	set, err := newShardedSet(ctx, setCfg, serverSide)
	if err != nil {
		cancel()
		return nil, err
	}
	buckets.newParts, buckets.onHeld = set.newBucketInformers, setCfg.shard.slots.resize
	set.set.Start(setCtx)
	shard.MetricControllerSets.Set(1)
	return &shardedReplica{set: set, buckets: buckets, cancel: cancel}, nil
}

// stop stops the replica's set (its buckets stopped already by the coordinator).
func (r *shardedReplica) stop() {
	r.set.set.Stop()
	r.cancel()
	shard.MetricControllerSets.Set(0)
}

// runCoordinatorOnce runs a new shard.Coordinator of this replica over buckets (hold: Config.Hold) until ctx
// ends, with syncCheck following it, and returns it and its error.
func runCoordinatorOnce(ctx context.Context, cfg Config, client kubernetes.Interface, buckets *bucketRunner, syncCheck *serving.SyncCheck, hold func() time.Time) (*shard.Coordinator, error) {
	le := cfg.LeaderElection
	coord := shard.NewCoordinator(shard.Config{
		Client: client, Namespace: le.ResourceNamespace, RingName: cfg.Sharding.RingName, Identity: le.Identity,
		Buckets:   cfg.Sharding.Buckets,
		Durations: shard.Durations{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod},
		Measure:   measureFor(cfg), Runner: buckets, Hold: hold,
	})
	syncCheck.Set(coord.HasSynced)
	defer syncCheck.Set(nil)
	if cfg.Started != nil {
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), coord.HasSynced) {
				cfg.Started()
			}
		}()
	}
	return coord, coord.Run(ctx)
}

// probeShardFiltering reports whether the API server filters lists and watches by shard, says so in the log
// and kubedeploy_shard_server_side_filtering; a failed probe counts as no.
func probeShardFiltering(ctx context.Context, client kubernetes.Interface) bool {
	logger := klog.FromContext(ctx)
	serverSide, err := shard.Probe(ctx, client, shard.Scope{Ranges: []shard.Range{{Start: 0, Last: math.MaxUint64 / 2}}})
	if err != nil {
		logger.Error(err, "Could not probe the API server for sharded list and watch; filtering client-side only")
	}
	shard.RegisterMetrics()
	shard.MetricServerSideFiltering.Set(map[bool]float64{true: 1, false: 0}[serverSide])
	if serverSide {
		logger.Info("Sharded mode: the API server filters lists and watches by shard (ShardedListAndWatch); this replica filters too")
	} else {
		logger.Info("Sharded mode: the API server does not filter by shard (ShardedListAndWatch off, or an older server); this replica filters client-side only")
	}
	return serverSide
}

// releaseIfLast releases the sharded replicas' hold on the leader Lease when coord's membership saw no other live
// replica: the last sharded replica to stop lets a leader-elected process start at once instead of after
// LeaseDuration. Failure is logged.
func releaseIfLast(ctx context.Context, mode *modeLease, coord *shard.Coordinator) {
	if coord != nil && slices.ContainsFunc(coord.Membership().Live(), func(id string) bool { return id != coord.Membership().Identity() }) {
		return
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mode.le.RenewDeadline)
	defer cancel()
	if err := mode.release(releaseCtx); err != nil {
		klog.FromContext(ctx).Info("Could not release the leader Lease; it expires by itself", "lease", mode.name, "err", err)
		return
	}
	klog.FromContext(ctx).Info("Released the leader Lease: no other sharded replica is live", "lease", mode.name)
}

// measureFor returns the measure of a new ring or a re-split: every namespace and its steady pods
// (shard.SteadyByNamespace, SH-8), read from the API server's cache.
func measureFor(cfg Config) func(ctx context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		rc := cfg.restConfigFor("shard-coordinator")
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		meta, err := metadata.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		return shard.SteadyByNamespace(ctx, client, meta)
	}
}
