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
	// ConsolidateAfter is accepted and ignored. Deprecated: a replica runs one set of controllers whatever its
	// buckets, each bucket with informers of its own that no move of another bucket restarts (SH-9); there is
	// nothing to merge (--shard-consolidate-after is a documented no-op).
	ConsolidateAfter time.Duration
}

// Default fills zero fields.
func (s *Sharding) Default() {
	s.Buckets = cmp.Or(s.Buckets, DefaultShardBuckets)
	s.RingName = cmp.Or(s.RingName, shard.DefaultRingName)
	s.ConsolidateAfter = cmp.Or(s.ConsolidateAfter, DefaultConsolidateAfter)
}

// Validate returns an error for a bucket count outside 1..1024.
func (s Sharding) Validate() error {
	if s.Enabled && (s.Buckets < 1 || s.Buckets > 1024) {
		return fmt.Errorf("shard buckets must be between 1 and 1024, got %d", s.Buckets)
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

// fencedTransport refuses every write into a namespace outside its claims' buckets (SH-1), and every write
// into a bucket's namespace while that bucket's claim is not valid (SH-2); a write into no namespace needs every
// claim valid. Reads pass. A replica whose claim lapsed writes nothing there, whatever its workers were doing,
// and a set's controllers write only in their buckets' namespaces, whatever their caches held.
type fencedTransport struct {
	next   http.RoundTripper
	claims []shard.Claim
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return t.next.RoundTrip(req)
	}
	ns, namespaced := requestNamespace(req.URL.Path)
	if !namespaced {
		for _, c := range t.claims {
			if !c.Fence.Valid() {
				return nil, shard.ErrFenced
			}
		}
		return t.next.RoundTrip(req)
	}
	i := slices.IndexFunc(t.claims, func(c shard.Claim) bool { return c.Range.Contains(ns) })
	if i < 0 {
		return nil, fmt.Errorf("%w: %s %s is in namespace %q, outside this replica's buckets here", shard.ErrFenced, req.Method, req.URL.Path, ns)
	}
	if !t.claims[i].Fence.Valid() {
		return nil, fmt.Errorf("%w: the claim on bucket %d, namespace %q's, is not valid", shard.ErrFenced, t.claims[i].Bucket, ns)
	}
	return t.next.RoundTrip(req)
}

// requestNamespace returns the namespace of a request to a namespaced object or collection
// (/api/v1/namespaces/<ns>/… or /apis/<group>/<version>/namespaces/<ns>/…); a request to a namespace object
// itself has none.
func requestNamespace(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" && (i == 2 || i == 3) {
			return parts[i+1], true
		}
	}
	return "", false
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
// by shard, builds the replica's one ControllerSet over union informers (shardedSet), and runs a
// shard.Coordinator whose buckets come and go in it (bucketRunner, SH-9). The set stops only after the
// coordinator has drained and released every bucket. The error is a client's, a controller's, or the
// coordinator's informers'.
func runSharded(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck) error {
	logger := klog.FromContext(ctx)
	client, err := cfg.clientFor("shard-coordinator")
	if err != nil {
		return err
	}
	serverSide := probeShardFiltering(ctx, client)
	setCtx, stopSetCtx := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSetCtx()
	le := cfg.LeaderElection
	buckets := newBucketRunner(setCtx, runner.NewScope(), nil, le.RenewDeadline)
	cfg.shard = &shardContext{claims: buckets.currentClaims, scope: buckets.scope, limiters: &sharedLimiters{}, slots: &sharedSlots{logger: logger}}
	set, err := newShardedSet(ctx, cfg, serverSide)
	if err != nil {
		return err
	}
	buckets.newParts, buckets.onHeld = set.newBucketInformers, cfg.shard.slots.resize
	set.set.Start(setCtx)
	shard.MetricControllerSets.Set(1)
	defer func() {
		set.set.Stop()
		shard.MetricControllerSets.Set(0)
	}()
	coord := shard.NewCoordinator(shard.Config{
		Client: client, Namespace: le.ResourceNamespace, RingName: cfg.Sharding.RingName, Identity: le.Identity,
		Buckets:   cfg.Sharding.Buckets,
		Durations: shard.Durations{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod},
		Measure:   measureFor(cfg), Runner: buckets,
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
	return coord.Run(ctx)
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

// measureFor returns the measure of a new ring: every namespace and its pods, read as metadata only from the
// API server's cache.
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
		return shard.PodsByNamespace(ctx, client, meta)
	}
}
