package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// fakeParts are a bucket's informers in a test: the test says when they have synced; what happens to them is
// logged.
type fakeParts struct {
	f      *fakeBuckets
	bucket int
	mu     sync.Mutex
	synced bool
}

// fakeBuckets builds fakeParts and logs what happens to them, in order.
type fakeBuckets struct {
	mu    sync.Mutex
	log   []string
	fail  int // the next fail builds fail
	parts map[int]*fakeParts
}

func (f *fakeBuckets) build(_ context.Context, c shard.Claim) (bucketParts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("no client")
	}
	p := &fakeParts{f: f, bucket: c.Bucket}
	f.parts[c.Bucket] = p
	f.log = append(f.log, fmt.Sprint("build ", c.Bucket))
	return p, nil
}

func (f *fakeBuckets) record(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, what)
}

func (f *fakeBuckets) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	return out
}

func (f *fakeBuckets) sync(bucket int) {
	f.mu.Lock()
	p := f.parts[bucket]
	f.mu.Unlock()
	p.mu.Lock()
	p.synced = true
	p.mu.Unlock()
}

func (p *fakeParts) Start() { p.f.record(fmt.Sprint("start ", p.bucket)) }
func (p *fakeParts) Stop()  { p.f.record(fmt.Sprint("stop ", p.bucket)) }
func (p *fakeParts) HasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}
func (p *fakeParts) Pods() (int, int)   { return 10 * (p.bucket + 1), p.bucket + 1 }
func (p *fakeParts) Steady() (int, int) { return 8 * (p.bucket + 1), p.bucket + 1 }

// quarterClaims returns n claims on the first n quarters of the hash space, each with a valid fence.
func quarterClaims(n int) []shard.Claim {
	out := make([]shard.Claim, n)
	for i := range out {
		q := uint64(i)
		out[i] = shard.Claim{Bucket: i, Range: shard.Range{Start: q << 62, Last: q<<62 | (1<<62 - 1)}, Fence: shard.NewFence(func() bool { return true })}
	}
	return out
}

// hookLog is a ScopeHooks that logs, in the fakeBuckets' log, which buckets' namespaces were forgotten and
// admitted.
func hookLog(f *fakeBuckets, claims []shard.Claim) runner.ScopeHooks {
	which := func(in func(string) bool) []int {
		var bs []int
		for _, c := range claims {
			if in(nsOf(c)) {
				bs = append(bs, c.Bucket)
			}
		}
		return bs
	}
	return runner.ScopeHooks{
		Forget:   func(in func(string) bool) { f.record(fmt.Sprint("forget ", which(in))) },
		Admitted: func(in func(string) bool) { f.record(fmt.Sprint("admitted ", which(in))) },
	}
}

// nsOfCache remembers nsOf's answers.
var nsOfCache sync.Map

// nsOf returns a namespace whose hash falls in c's range ("" if none of ns-0…ns-9999 does).
func nsOf(c shard.Claim) string {
	if ns, ok := nsOfCache.Load(c.Range); ok {
		return ns.(string)
	}
	for i := range 10000 {
		if ns := fmt.Sprintf("ns-%d", i); c.Range.Contains(ns) {
			nsOfCache.Store(c.Range, ns)
			return ns
		}
	}
	return ""
}

// newTestBucketRunner returns a bucketRunner over fakeBuckets with a scope whose hooks log into the fake.
func newTestBucketRunner(t *testing.T, claims []shard.Claim) (*bucketRunner, *fakeBuckets) {
	t.Helper()
	f := &fakeBuckets{parts: map[int]*fakeParts{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scope := runner.NewScope()
	scope.Watch(hookLog(f, claims))
	return newBucketRunner(ctx, scope, f.build, time.Minute), f
}

func start(t *testing.T, r *bucketRunner, c shard.Claim) shard.Running {
	t.Helper()
	run, err := r.Start(r.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestBucketTakenIsAdmittedOnceSynced: a bucket started has its claim checked at once and its informers
// started, but its namespaces are admitted only once its caches have synced: the controllers forget what they
// remembered of them first, then enqueue them (SH-3). Another bucket taken meanwhile changes nothing of the
// first (SH-9).
func TestBucketTakenIsAdmittedOnceSynced(t *testing.T) {
	claims := quarterClaims(2)
	r, f := newTestBucketRunner(t, claims)
	run0 := start(t, r, claims[0])
	if got := r.currentClaims(); len(got) != 1 || got[0].Bucket != 0 {
		t.Errorf("claims checked after bucket 0 started: %v", got)
	}
	if run0.HasSynced() || r.scope.Admits(nsOf(claims[0])) {
		t.Error("bucket 0 admitted before its caches synced")
	}
	f.sync(0)
	waitUntil(t, "bucket 0 to be admitted", run0.HasSynced)
	if !r.scope.Admits(nsOf(claims[0])) {
		t.Error("bucket 0's namespaces not admitted once its caches synced")
	}
	run1 := start(t, r, claims[1])
	f.sync(1)
	waitUntil(t, "bucket 1 to be admitted", run1.HasSynced)
	want := []string{"build 0", "start 0", "forget [0]", "admitted [0]", "build 1", "start 1", "forget [1]", "admitted [1]"}
	if got := f.take(); !slices.Equal(got, want) {
		t.Errorf("log %v, want %v", got, want)
	}
	if pods, nss := run1.Pods(); pods != 20 || nss != 2 {
		t.Errorf("bucket 1's Pods() = %d, %d; want its parts' 20, 2", pods, nss)
	}
}

// TestBucketStopTouchesNothingElse: stopping bucket 0 while a sync of its namespace and one of bucket 1's are in
// flight returns only once bucket 0's sync has finished, by itself; bucket 1's sync is never cancelled, its
// informers never stopped, and its keys go on syncing; bucket 0's claim leaves the claims only after its drain
// (SH-3, SH-9).
func TestBucketStopTouchesNothingElse(t *testing.T) {
	claims := quarterClaims(2)
	r, f := newTestBucketRunner(t, claims)
	runs := []shard.Running{start(t, r, claims[0]), start(t, r, claims[1])}
	f.sync(0)
	f.sync(1)
	waitUntil(t, "both buckets admitted", func() bool { return runs[0].HasSynced() && runs[1].HasSynced() })
	f.take()
	syncs := newHeldSyncs()
	q := runController(t, r.scope, syncs.sync)
	ns0, ns1 := nsOf(claims[0]), nsOf(claims[1])
	q.Enqueue(cache.ObjectName{Namespace: ns0, Name: "web"})
	q.Enqueue(cache.ObjectName{Namespace: ns1, Name: "web"})
	syncs.waitStarted(t, ns0, ns1)
	stopped := make(chan struct{})
	go func() { runs[0].Stop(); close(stopped) }()
	waitUntil(t, "bucket 0 to be dropped", func() bool { return !r.scope.Admits(ns0) })
	if got := r.currentClaims(); len(got) != 2 {
		t.Errorf("bucket 0's claim left before its sync finished: %v", got)
	}
	syncs.release(ns0)
	<-stopped
	if err := syncs.ctx(ns1).Err(); err != nil {
		t.Errorf("bucket 1's sync was cancelled by bucket 0's stop: %v", err)
	}
	if got, want := f.take(), []string{"stop 0", "forget [0]"}; !slices.Equal(got, want) {
		t.Errorf("log %v, want %v: nothing of bucket 1 touched", got, want)
	}
	if got := r.currentClaims(); len(got) != 1 || got[0].Bucket != 1 {
		t.Errorf("claims after bucket 0 stopped: %v, want bucket 1's", got)
	}
	if runs[0].HasSynced() || !runs[1].HasSynced() {
		t.Error("after bucket 0 stopped: want it not synced and bucket 1 synced")
	}
	syncs.release(ns1)
	q.Enqueue(cache.ObjectName{Namespace: ns1, Name: "api"})
	syncs.waitStarted(t, ns1+"/api")
}

// TestBucketStoppedBeforeItSynced: a bucket stopped before its caches synced is never admitted, even if they
// sync after.
func TestBucketStoppedBeforeItSynced(t *testing.T) {
	claims := quarterClaims(1)
	r, f := newTestBucketRunner(t, claims)
	run := start(t, r, claims[0])
	r.StopAll([]shard.Running{run})
	f.sync(0)
	if got, want := f.take(), []string{"build 0", "start 0", "stop 0", "forget [0]"}; !slices.Equal(got, want) {
		t.Errorf("log %v, want %v", got, want)
	}
	if run.HasSynced() || r.scope.Admits(nsOf(claims[0])) {
		t.Error("a stopped bucket was admitted")
	}
	if len(r.currentClaims()) != 0 {
		t.Errorf("claims after the only bucket stopped: %v", r.currentClaims())
	}
}

// TestBucketBuildFails: a bucket whose informers cannot be built is not started (the coordinator retries it).
func TestBucketBuildFails(t *testing.T) {
	claims := quarterClaims(1)
	r, f := newTestBucketRunner(t, claims)
	f.fail = 1
	if _, err := r.Start(r.ctx, claims[0]); err == nil {
		t.Fatal("Start succeeded with a build that failed")
	}
	if len(r.currentClaims()) != 0 {
		t.Errorf("claims after a failed start: %v", r.currentClaims())
	}
	start(t, r, claims[0]) // retried
}

// heldSyncs is a sync function whose syncs are held until released, by namespace.
type heldSyncs struct {
	mu      sync.Mutex
	started map[string]context.Context // by namespace and by key
	gates   map[string]chan struct{}
}

func newHeldSyncs() *heldSyncs {
	return &heldSyncs{started: map[string]context.Context{}, gates: map[string]chan struct{}{}}
}

func (h *heldSyncs) gate(ns string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gates[ns] == nil {
		h.gates[ns] = make(chan struct{})
	}
	return h.gates[ns]
}

func (h *heldSyncs) sync(ctx context.Context, key cache.ObjectName) (runner.Result, error) {
	h.mu.Lock()
	h.started[key.Namespace], h.started[key.String()] = ctx, ctx
	h.mu.Unlock()
	select {
	case <-h.gate(key.Namespace):
	case <-ctx.Done():
	}
	return runner.Result{}, nil
}

func (h *heldSyncs) ctx(name string) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started[name]
}

func (h *heldSyncs) waitStarted(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		waitUntil(t, "the sync of "+n, func() bool { return h.ctx(n) != nil })
	}
}

func (h *heldSyncs) release(ns string) { close(h.gate(ns)) }

// runController runs a runner.Runner of 2 workers over sync with scope until the test ends.
func runController(t *testing.T, scope *runner.Scope, sync runner.SyncFunc) *runner.Runner {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	q := runner.New("test", sync, runner.WithScope(scope),
		runner.WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)))
	done := make(chan struct{})
	go func() { q.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return q
}

// TestSyncsFollowTheReplicasShare: in sharded mode --concurrent-*-syncs are the fleet's (issue 35): a replica
// holding held of the ring's buckets runs max(1, ⌊n × held ÷ of⌋) syncs at once, following its buckets as
// they start and stop; while no claim says the ring's size, the full n.
func TestSyncsFollowTheReplicasShare(t *testing.T) {
	claims := quarterClaims(4)
	for i := range claims {
		claims[i].Of = 12
	}
	r, _ := newTestBucketRunner(t, claims)
	slots := &sharedSlots{logger: klog.Background()}
	r.onHeld = slots.resize
	deployments := slots.get(DeploymentController, 5)
	replicaSets := slots.get(ReplicaSetController, 7)
	check := func(when string, wantD, wantRS int) {
		t.Helper()
		if d, rs := deployments.Limit(), replicaSets.Limit(); d != wantD || rs != wantRS {
			t.Errorf("%s: syncs at once %d Deployment, %d ReplicaSet; want %d and %d", when, d, rs, wantD, wantRS)
		}
	}
	check("before any claim", 5, 7)
	runs := []shard.Running{start(t, r, claims[0])}
	check("1 of 12 buckets", 1, 1) // ⌊5/12⌋ and ⌊7/12⌋ are 0: at least one
	for _, c := range claims[1:] {
		runs = append(runs, start(t, r, c))
	}
	check("4 of 12 buckets", 1, 2) // ⌊20/12⌋, ⌊28/12⌋
	runs[3].Stop()
	check("3 of 12 buckets", 1, 1)
	later := slots.get("another", 12) // a controller's slots made after the share is known start divided
	if later.Limit() != 3 {
		t.Errorf("slots built while holding 3 of 12 buckets: %d syncs at once, want ⌊12×3/12⌋ = 3", later.Limit())
	}
	slots.resize(12, 12)
	check("every bucket", 5, 7)
	slots.resize(6, 12)
	check("half the buckets", 2, 3)
	slots.resize(0, 12)
	check("no bucket", 5, 7)
}
