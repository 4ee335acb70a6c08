package manager

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
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
// biggest with 1.125× the mean), and each replica's informers stay few (three per bucket, a watch each).
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
}

// Default fills zero fields.
func (s *Sharding) Default() {
	s.Buckets = cmp.Or(s.Buckets, DefaultShardBuckets)
	s.RingName = cmp.Or(s.RingName, shard.DefaultRingName)
}

// Validate returns an error for a bucket count outside 1..1024.
func (s Sharding) Validate() error {
	if s.Enabled && (s.Buckets < 1 || s.Buckets > 1024) {
		return fmt.Errorf("shard buckets must be between 1 and 1024, got %d", s.Buckets)
	}
	return nil
}

// shardContext is what a bucket's ControllerSet is built with in sharded mode: the namespaces it may see and
// the fence every write checks, and the rate limiters all of the process's sets share per controller (so that
// QPS and Burst limit the process, not each bucket).
type shardContext struct {
	scope    shard.Scope
	fence    *shard.Fence
	limiters *sharedLimiters
	slots    *sharedSlots
}

// sharedSlots is one runner.Slots per controller name for the whole process: every bucket's controller of a
// kind runs its workers, but no more than the configured number sync at once in the process (without it, a
// replica with 8 buckets ran 8 × --concurrent-*-syncs syncs behind one client rate limiter, and decisions
// landed seconds late: EX-3's pod bound was overrun in tests).
type sharedSlots struct {
	mu sync.Mutex
	by map[string]*runner.Slots
}

// slotsFor returns the Slots of the named controller in a sharded set, nil otherwise.
func (c Config) slotsFor(controller string, workers int) *runner.Slots {
	if c.shard == nil {
		return nil
	}
	s := c.shard.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*runner.Slots{}
	}
	if _, ok := s.by[controller]; !ok {
		s.by[controller] = runner.NewSlots(workers)
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

// fencedTransport refuses every request but reads while the fence is not valid (SH-2), and every write into a
// namespace outside the scope (SH-1): a replica whose claim lapsed writes nothing, whatever its workers were
// doing, and a bucket's controllers write only in the bucket's namespaces, whatever their caches held.
type fencedTransport struct {
	next  http.RoundTripper
	fence *shard.Fence
	scope shard.Scope
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return t.next.RoundTrip(req)
	}
	if !t.fence.Valid() {
		return nil, shard.ErrFenced
	}
	if ns, ok := requestNamespace(req.URL.Path); ok && !t.scope.Contains(ns) {
		return nil, fmt.Errorf("%w: %s %s is in namespace %q, outside this bucket", shard.ErrFenced, req.Method, req.URL.Path, ns)
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

// applyShard sets the process's shared rate limiter and, for a controller's own clients, the fence on cfg.
func (s *shardContext) applyShard(cfg *rest.Config, controller string, qps float32, burst int) {
	cfg.RateLimiter = s.limiters.get(controller, qps, burst)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return fencedTransport{next: rt, fence: s.fence, scope: s.scope}
	})
}

// runSharded runs cfg's controllers in sharded mode until ctx ends: it probes whether the API server filters
// by shard, then runs a shard.Coordinator whose buckets each run a ControllerSet over their namespaces. The
// error is the coordinator client's or its informers'.
func runSharded(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck) error {
	logger := klog.FromContext(ctx)
	client, err := cfg.clientFor("shard-coordinator")
	if err != nil {
		return err
	}
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
	le := cfg.LeaderElection
	runner := &shardRunner{cfg: cfg, serverSide: serverSide, limiters: &sharedLimiters{}, slots: &sharedSlots{}}
	coord := shard.NewCoordinator(shard.Config{
		Client: client, Namespace: le.ResourceNamespace, RingName: cfg.Sharding.RingName, Identity: le.Identity,
		Buckets:   cfg.Sharding.Buckets,
		Durations: shard.Durations{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod},
		Measure:   measureFor(cfg), Runner: runner,
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

// shardRunner starts a bucket's ControllerSet (shard.Runner).
type shardRunner struct {
	cfg        Config
	serverSide bool
	limiters   *sharedLimiters
	slots      *sharedSlots
}

// Start builds and starts cfg's controllers over the claim's namespaces, logging with the bucket's index.
func (r *shardRunner) Start(ctx context.Context, c shard.Claim) (shard.Running, error) {
	cfg := r.cfg
	cfg.shard = &shardContext{scope: shard.Scope{Ranges: []shard.Range{c.Range}, ServerSide: r.serverSide}, fence: c.Fence, limiters: r.limiters, slots: r.slots}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("bucket", c.Bucket))
	set, err := NewControllerSet(ctx, cfg)
	if err != nil {
		return nil, err
	}
	set.Start(context.WithoutCancel(ctx))
	return shardSet{set}, nil
}

// shardSet is a bucket's ControllerSet as shard.Running.
type shardSet struct{ *ControllerSet }

// Pods counts the set's cached pods and the namespaces they are in.
func (s shardSet) Pods() (pods, namespaces int) {
	list, err := s.factory.Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return 0, 0
	}
	seen := map[string]bool{}
	for _, p := range list {
		seen[p.Namespace] = true
	}
	return len(list), len(seen)
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
