package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Runner starts what runs for one bucket: the controllers and their informers over the bucket's Scope.
type Runner interface {
	// Start starts it for b and returns once started (caches may still be syncing); every write it makes must
	// first check b.Fence (SH-2). The error is the build's; the bucket is then retried.
	Start(ctx context.Context, b Claim) (Running, error)
}

// BatchStopper is what a Runner implements to stop several of its buckets in one call: the coordinator stops
// the buckets it stops at once (a lapse, a re-split, a shutdown) through it, so that a Runner that runs
// buckets together drains them once, and does not start again those that are stopping too.
type BatchStopper interface {
	// StopAll stops every one of runs (each returned by this Runner's Start) as Running.Stop does, and returns
	// when all have stopped.
	StopAll(runs []Running)
}

// Running is what Runner.Start started.
type Running interface {
	// Stop stops enqueuing, waits for in-flight syncs, and stops the informers (SH-3); it returns when done.
	Stop()
	// HasSynced reports whether its caches have synced.
	HasSynced() bool
	// Pods and Namespaces count the cached pods and the namespaces they are in.
	Pods() (pods, namespaces int)
	// Steady counts, from the caches, the pods the bucket's namespaces hold at rest and the namespaces that
	// hold any: each Deployment's spec.replicas, each ReplicaSet's not controlled by a Deployment, and each pod
	// not controlled by a ReplicaSet, so that a rollout's surge does not change it (SH-8). It is the bucket's
	// weight in the ring (Bucket.Pods).
	Steady() (pods, namespaces int)
}

// Claim is one bucket won by this replica: its index and range in the ring, the ring's number of buckets
// then (Of; 0 when unknown), and the fence a writer checks.
type Claim struct {
	Bucket int
	Range  Range
	Of     int
	Fence  *Fence
}

// Fence says whether a claim may still be acted on (SH-2), and until when: while valid says so (the
// coordinator's: its epoch is the replica's current one, renewed within RenewDeadline without a lapse since the
// claim was won) and it has not been revoked. A fence built with NewFenceUntil also gives the instant its claim
// stops being valid (Deadline), so that a write can carry it.
type Fence struct {
	valid   func() bool
	until   func() time.Time
	now     func() time.Time
	revoked atomic.Bool
}

// NewFence returns a fence that holds while valid returns true and Revoke has not been called; it has no
// Deadline.
func NewFence(valid func() bool) *Fence { return &Fence{valid: valid} }

// NewFenceUntil returns a fence that holds while now() is before until() and Revoke has not been called; until
// returns the zero time once the claim is invalid for good (a new membership epoch).
func NewFenceUntil(until, now func() time.Time) *Fence { return &Fence{until: until, now: now} }

// Valid reports whether the claim may be acted on now.
func (f *Fence) Valid() bool {
	if f.revoked.Load() {
		return false
	}
	if f.until != nil {
		return f.now().Before(f.until())
	}
	return f.valid()
}

// Deadline returns the instant the claim stops being valid, unless it is renewed before (its membership
// renewed, SH-2), and true; or false for a fence without one (NewFence) or a revoked one. A write that must
// not land after its claim ended carries it as its deadline.
func (f *Fence) Deadline() (time.Time, bool) {
	if f.until == nil || f.revoked.Load() {
		return time.Time{}, false
	}
	return f.until(), true
}

// Revoke ends the fence for good.
func (f *Fence) Revoke() { f.revoked.Store(true) }

// ErrFenced is the error a fenced writer returns for a write refused because its claim is no longer valid.
var ErrFenced = errors.New("shard claim no longer valid: this replica does not own the namespace's bucket now")

// Config configures a Coordinator.
type Config struct {
	// Client reads and writes the ring ConfigMap and the Leases.
	Client kubernetes.Interface
	// Namespace holds the ring (RingName, default DefaultRingName) and the replicas' Leases.
	Namespace string
	RingName  string
	// Identity is this replica's identity, unique among the replicas.
	Identity string
	// Buckets is the number of buckets of a ring this replica creates (a ring that exists keeps its own).
	Buckets   int
	Durations Durations
	// Measure returns the cluster's namespaces and their steady pods (namespace → pods, as Running.Steady
	// counts them: SteadyByNamespace), for the bounds of a new ring or a re-split.
	Measure func(ctx context.Context) (map[string]int, error)
	Runner  Runner
	// WeightRefreshInterval is the least time between two rewrites of this replica's buckets' steady pods in
	// the ring (default DefaultWeightRefreshInterval).
	WeightRefreshInterval time.Duration
	// MinResplitInterval is the least time between two re-splits this replica asks for (default
	// DefaultMinResplitInterval).
	MinResplitInterval time.Duration
	// Clock is the membership's and the loop's clock (clock.RealClock{} when nil).
	Clock clock.WithTicker
	// Hold, if set, returns until when this replica's mode may act at all (SH-10: the sharded replicas' hold on
	// the leader-election Lease, as this replica last saw it renewed, + RenewDeadline); every claim's fence ends
	// then at the latest. Nil: no such limit.
	Hold func() time.Time
}

// Coordinator is one replica's part of the sharded mode: it keeps its membership, moves buckets as Next asks
// (SH-5, SH-7), and runs what Runner starts for each bucket it owns, only while its claim is valid (SH-2,
// SH-3). Build it with NewCoordinator and Run it once.
type Coordinator struct {
	cfg     Config
	member  *Membership
	rings   listerscorev1.ConfigMapLister
	trigger chan struct{}
	logger  klog.Logger
	// badRing is the last undecodable ring's error, logged once.
	badRing string
	// lastRefresh is when refreshWeights last wrote the ring, lastCount when it last counted the buckets' pods;
	// lastMeasure when maybeResplit last measured.
	lastRefresh, lastCount, lastMeasure time.Time

	// owned is how many buckets the ring gave this replica when last read, -1 before it was read.
	owned atomic.Int64

	mu      sync.Mutex
	running map[int]*bucketRun
}

type bucketRun struct {
	rng     Range
	epoch   int64
	fence   *Fence
	running Running
}

// NewCoordinator returns a coordinator for cfg (RingName and Clock defaulted).
func NewCoordinator(cfg Config) *Coordinator {
	if cfg.RingName == "" {
		cfg.RingName = DefaultRingName
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.WeightRefreshInterval == 0 {
		cfg.WeightRefreshInterval = DefaultWeightRefreshInterval
	}
	if cfg.MinResplitInterval == 0 {
		cfg.MinResplitInterval = DefaultMinResplitInterval
	}
	c := &Coordinator{cfg: cfg, trigger: make(chan struct{}, 1), running: map[int]*bucketRun{},
		member: NewMembership(cfg.Client, cfg.Namespace, cfg.RingName, cfg.Identity, cfg.Durations, cfg.Clock)}
	c.owned.Store(-1)
	return c
}

// HasSynced reports readiness in sharded mode: this replica's membership is valid, and it runs every bucket
// the ring gives it, each with synced caches ("owns its share and has synced it").
func (c *Coordinator) HasSynced() bool {
	if c.member.Epoch() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(c.running)) != c.owned.Load() {
		return false
	}
	for _, run := range c.running {
		if !run.running.HasSynced() {
			return false
		}
	}
	return true
}

// Running returns the indexes of the buckets this replica runs now, sorted.
func (c *Coordinator) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.running))
	for i := range c.running {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Membership is the coordinator's membership.
func (c *Coordinator) Membership() *Membership { return c.member }

// Run runs the coordinator until ctx ends, then stops every bucket it runs (draining in-flight syncs),
// releases its buckets in the ring and deletes its Lease. It returns an error only when its informers cannot
// sync before ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	c.logger = klog.FromContext(ctx).WithValues("identity", c.cfg.Identity)
	ctx = klog.NewContext(ctx, c.logger)
	stopInformers, err := c.startInformers(ctx)
	if err != nil {
		return err
	}
	defer stopInformers()
	memberCtx, stopMember := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.member.Run(memberCtx, c.poke) })
	ticker := c.cfg.Clock.NewTicker(c.cfg.Durations.RetryPeriod)
	defer ticker.Stop()
	for ctx.Err() == nil {
		c.reconcile(ctx)
		select {
		case <-ctx.Done():
		case <-c.trigger:
		case <-ticker.C():
		}
	}
	stopMember()
	wg.Wait()
	c.leave(context.WithoutCancel(ctx))
	return nil
}

func (c *Coordinator) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// startInformers starts the ring's and the Leases' informers and waits for them; the Leases feed the
// membership's observations.
func (c *Coordinator) startInformers(ctx context.Context) (stop func(), err error) {
	ringFactory := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.cfg.RingName).String()
		}))
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{MemberLabel: c.cfg.RingName}.String()
		}))
	ringInf := ringFactory.Core().V1().ConfigMaps()
	c.rings = ringInf.Lister()
	poke := func(any) { c.poke() }
	_, err1 := ringInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(any, any) { c.poke() }, DeleteFunc: poke})
	_, err2 := leaseFactory.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.observeLease(o, false) },
		UpdateFunc: func(_, o any) { c.observeLease(o, false) },
		DeleteFunc: func(o any) { c.observeLease(o, true) },
	})
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("watching the shard ring: %w", err)
	}
	ringFactory.Start(ctx.Done())
	leaseFactory.Start(ctx.Done())
	stop = func() { ringFactory.Shutdown(); leaseFactory.Shutdown() }
	if !allSynced(ringFactory.WaitForCacheSync(ctx.Done())) || !allSynced(leaseFactory.WaitForCacheSync(ctx.Done())) {
		stop()
		return nil, fmt.Errorf("the shard ring's informers did not sync: %w", ctx.Err())
	}
	return stop, nil
}

func allSynced[K comparable](synced map[K]bool) bool {
	for _, ok := range synced {
		if !ok {
			return false
		}
	}
	return true
}

// observeLease records a peer's Lease change (or deletion) in the membership.
func (c *Coordinator) observeLease(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Spec.HolderIdentity == nil {
		return
	}
	id := *lease.Spec.HolderIdentity
	if deleted {
		lease = nil
	}
	c.member.Observe(id, lease)
	c.poke()
}

// readRing returns the ring ConfigMap from the cache and its ring; cm nil means none exists. A ring that does
// not decode is logged once and returned as an error: nothing acts on it, and nothing overwrites it.
func (c *Coordinator) readRing() (*v1.ConfigMap, Ring, error) {
	cm, err := c.rings.ConfigMaps(c.cfg.Namespace).Get(c.cfg.RingName)
	if apierrors.IsNotFound(err) {
		return nil, Ring{}, nil
	}
	if err != nil {
		return nil, Ring{}, err
	}
	ring, err := DecodeRing(cm)
	if err != nil {
		if err.Error() != c.badRing {
			c.badRing = err.Error()
			c.logger.Error(err, "The shard ring cannot be read: this replica runs no bucket until it is fixed, or deleted to be made again")
		}
		return nil, Ring{}, err
	}
	c.badRing = ""
	return cm, ring, nil
}

// writeRing updates the ring conditioned on cm's resourceVersion (SH-7); a conflict means someone else moved
// first, and the caller's next round reads again.
func (c *Coordinator) writeRing(ctx context.Context, cm *v1.ConfigMap, ring Ring) error {
	_, err := c.cfg.Client.CoreV1().ConfigMaps(c.cfg.Namespace).Update(ctx, EncodeRing(cm, c.cfg.Namespace, c.cfg.RingName, ring), metav1.UpdateOptions{})
	return err
}

// createRing measures the cluster and creates an unowned ring of cfg.Buckets buckets; AlreadyExists means a
// peer made one first. The error is Measure's or the API server's.
func (c *Coordinator) createRing(ctx context.Context) error {
	pods, err := c.cfg.Measure(ctx)
	if err != nil {
		return fmt.Errorf("measuring namespaces for a new shard ring: %w", err)
	}
	ring := NewRing(Bounds(pods, c.cfg.Buckets), pods)
	_, err = c.cfg.Client.CoreV1().ConfigMaps(c.cfg.Namespace).Create(ctx, EncodeRing(nil, c.cfg.Namespace, c.cfg.RingName, ring), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		c.logger.Info("Created the shard ring", "ring", klog.KRef(c.cfg.Namespace, c.cfg.RingName), "buckets", len(ring.Buckets), "namespaces", len(pods))
	}
	return err
}

// now is the coordinator's clock's time.
func (c *Coordinator) now() time.Time { return c.cfg.Clock.Now() }

// claimValidUntil returns when a claim won in epoch stops being valid (SH-2): the membership's validity, cut
// short by the mode's hold (Config.Hold, SH-10); the zero time once it is invalid for good.
func (c *Coordinator) claimValidUntil(epoch int64) time.Time {
	until := c.member.ValidUntil(epoch)
	if c.cfg.Hold != nil && !until.IsZero() {
		if hold := c.cfg.Hold(); hold.Before(until) {
			return hold
		}
	}
	return until
}
