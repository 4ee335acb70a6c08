package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// fakeSets builds fakeSets for a groupRunner and logs what happens to them, in order.
type fakeSets struct {
	mu     sync.Mutex
	log    []string
	fail   int // the next fail builds fail
	sets   []*fakeSet
	pods   cache.Indexer
	synced bool
}

type fakeSet struct {
	f       *fakeSets
	buckets []int
	running bool
}

func (f *fakeSets) build(_ context.Context, claims []shard.Claim) (bucketSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		f.log = append(f.log, fmt.Sprint("build failed ", bucketsOf(claims)))
		return nil, errors.New("no client")
	}
	s := &fakeSet{f: f, buckets: bucketsOf(claims)}
	f.sets = append(f.sets, s)
	return s, nil
}

func (f *fakeSets) record(what string, s *fakeSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprint(what, " ", s.buckets))
}

func (f *fakeSets) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	slices.Sort(out) // sets stopped side by side log in any order; the tests check what, not the order
	return out
}

func (f *fakeSets) running() (sets [][]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sets {
		if s.running {
			sets = append(sets, s.buckets)
		}
	}
	return sets
}

func (s *fakeSet) Start(context.Context) {
	s.f.record("start", s)
	s.f.mu.Lock()
	s.running = true
	s.f.mu.Unlock()
}
func (s *fakeSet) Stop() { s.f.record("stop", s); s.f.mu.Lock(); s.running = false; s.f.mu.Unlock() }
func (s *fakeSet) HasSynced() bool {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.running && s.f.synced
}
func (s *fakeSet) podIndexer() cache.Indexer {
	return s.f.pods
}

// quarterClaims returns n claims on the first n quarters of the hash space, each with a valid fence.
func quarterClaims(n int) []shard.Claim {
	out := make([]shard.Claim, n)
	for i := range out {
		q := uint64(i)
		out[i] = shard.Claim{Bucket: i, Range: shard.Range{Start: q << 62, Last: q<<62 | (1<<62 - 1)}, Fence: shard.NewFence(func() bool { return true })}
	}
	return out
}

func newTestGroupRunner(t *testing.T) (*groupRunner, *fakeSets, *time.Time) {
	f := &fakeSets{synced: true, pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	r := newGroupRunner(f.build, time.Minute) // the tests call consolidate themselves
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.ctx = ctx
	r.looping = true // no background loop: consolidate is called by the test
	return r, f, &now
}

// mergedGroupRunner returns a test groupRunner with n buckets started and merged into one set, the fake's log
// emptied, and the buckets' handles in order.
func mergedGroupRunner(t *testing.T, n int) (*groupRunner, *fakeSets, []shard.Running) {
	t.Helper()
	r, f, now := newTestGroupRunner(t)
	runs := startAll(t, r, quarterClaims(n))
	*now = now.Add(time.Hour)
	r.consolidate()
	f.take()
	return r, f, runs
}

// startAll starts every claim, one at a time, and returns their handles in order.
func startAll(t *testing.T, r *groupRunner, claims []shard.Claim) []shard.Running {
	t.Helper()
	runs := make([]shard.Running, len(claims))
	for i, c := range claims {
		runs[i] = start(t, r, c)
	}
	return runs
}

func start(t *testing.T, r *groupRunner, c shard.Claim) shard.Running {
	t.Helper()
	run, err := r.Start(r.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestGroupRunnerMergesQuietBuckets: each bucket won starts a set of its own at once; when the buckets have not
// changed for the quiet period the sets are all stopped (drained) before one set over every bucket starts, so
// the replica lists and watches once (issue 35, Scale; SH-3: no set of the merged buckets runs beside another).
func TestGroupRunnerMergesQuietBuckets(t *testing.T) {
	r, f, now := newTestGroupRunner(t)
	claims := quarterClaims(3)
	runs := startAll(t, r, claims)
	if got, want := f.take(), []string{"start [0]", "start [1]", "start [2]"}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
	*now = now.Add(59 * time.Second)
	r.consolidate()
	if got := f.take(); len(got) != 0 {
		t.Fatalf("before the quiet period: %v, want nothing", got)
	}
	*now = now.Add(time.Second)
	r.consolidate()
	if got, want := f.take(), []string{"start [0 1 2]", "stop [0]", "stop [1]", "stop [2]"}; !slices.Equal(got, want) {
		t.Fatalf("merge: %v, want %v", got, want)
	}
	if got := f.running(); len(got) != 1 || !slices.Equal(got[0], []int{0, 1, 2}) {
		t.Fatalf("running %v, want one set of [0 1 2]", got)
	}
	for i, run := range runs {
		if !run.HasSynced() {
			t.Errorf("bucket %d not synced in the merged set", i)
		}
	}
	*now = now.Add(time.Hour)
	r.consolidate()
	if got := f.take(); len(got) != 0 {
		t.Fatalf("one set already: %v, want nothing", got)
	}
}

// TestGroupRunnerStopDrainsTheSet: a bucket stopped out of a merged set stops (drains) the whole set before
// Stop returns, and the set's other buckets start again without it; buckets stopped together (StopAll, the
// coordinator's stop of several) stop their set once and start nothing again.
func TestGroupRunnerStopDrainsTheSet(t *testing.T) {
	r, f, runs := mergedGroupRunner(t, 4)

	runs[1].Stop()
	if got, want := f.take(), []string{"start [0 2 3]", "stop [0 1 2 3]"}; !slices.Equal(got, want) {
		t.Fatalf("stop of bucket 1: %v, want %v", got, want)
	}
	if runs[1].HasSynced() {
		t.Error("bucket 1 still reports synced after its Stop")
	}
	if !runs[0].HasSynced() {
		t.Error("bucket 0 not synced in the set started again")
	}

	r.StopAll([]shard.Running{runs[0], runs[2], runs[3]})
	if got, want := f.take(), []string{"stop [0 2 3]"}; !slices.Equal(got, want) || f.running() != nil {
		t.Fatalf("StopAll of the rest: %v, running %v; want %v and nothing running", got, f.running(), want)
	}
	runs[0].Stop() // a second Stop of a stopped bucket is a no-op
	if got := f.take(); len(got) != 0 {
		t.Fatalf("second Stop: %v, want nothing", got)
	}
}

// TestGroupRunnerRetriesABuildThatFailed: when the set of the buckets left after a Stop cannot be built, they
// report not synced, and the next round builds them again.
func TestGroupRunnerRetriesABuildThatFailed(t *testing.T) {
	r, f, runs := mergedGroupRunner(t, 2)
	f.fail = 1
	runs[0].Stop()
	if got, want := f.take(), []string{"build failed [1]", "stop [0 1]"}; !slices.Equal(got, want) {
		t.Fatalf("stop with a failing build: %v, want %v", got, want)
	}
	if runs[1].HasSynced() {
		t.Fatal("bucket 1 synced with no set")
	}
	r.consolidate()
	if got, want := f.take(), []string{"start [1]"}; !slices.Equal(got, want) {
		t.Fatalf("retry: %v, want %v", got, want)
	}
	if !runs[1].HasSynced() {
		t.Fatal("bucket 1 not synced after the retry")
	}
}

// TestGroupRunnerPodsPerBucket: in a merged set each bucket counts only its own namespaces' pods (the ring's
// weights, SH-5, come from these counts).
func TestGroupRunnerPodsPerBucket(t *testing.T) {
	_, f, runs := mergedGroupRunner(t, 2)
	want := [2][2]int{}
	for i := 0; want[0][1] < 3 || want[1][1] < 2; i++ {
		ns := fmt.Sprintf("ns-%03d", i)
		q := shard.Hash(ns) >> 62
		if q > 1 || want[q][1] >= 3 {
			continue
		}
		want[q][1]++
		for p := range int(q) + 2 { // quarter 0's namespaces get 2 pods each, quarter 1's 3
			if err := f.pods.Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("p", p)}}); err != nil {
				t.Fatal(err)
			}
			want[q][0]++
		}
	}
	for i, run := range runs {
		if pods, nss := run.Pods(); pods != want[i][0] || nss != want[i][1] {
			t.Errorf("bucket %d: %d pods in %d namespaces, want %d in %d", i, pods, nss, want[i][0], want[i][1])
		}
	}
}

// TestGroupRunnerParallelStops: Stops of one set's buckets called side by side (not through StopAll) may start
// the rest again in between, but when all have returned nothing runs and every set started was stopped.
func TestGroupRunnerParallelStops(t *testing.T) {
	_, f, runs := mergedGroupRunner(t, 4)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(run.Stop)
	}
	wg.Wait()
	if got := f.running(); got != nil {
		t.Fatalf("running after every Stop returned: %v", got)
	}
	for _, run := range runs {
		if run.HasSynced() {
			t.Fatal("a stopped bucket reports synced")
		}
	}
}

// TestSyncsFollowTheReplicasShare: in sharded mode --concurrent-*-syncs are the fleet's (issue 35): a replica
// holding held of the ring's buckets runs max(1, ⌊n × held ÷ of⌋) syncs at once, following its buckets as
// they start, merge and leave; while no claim says the ring's size, the full n.
func TestSyncsFollowTheReplicasShare(t *testing.T) {
	r, _, now := newTestGroupRunner(t)
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
	claims := quarterClaims(4)
	for i := range claims {
		claims[i].Of = 12
	}
	runs := []shard.Running{start(t, r, claims[0])}
	check("1 of 12 buckets", 1, 1) // ⌊5/12⌋ and ⌊7/12⌋ are 0: at least one
	for _, c := range claims[1:] {
		runs = append(runs, start(t, r, c))
	}
	check("4 of 12 buckets", 1, 2) // ⌊20/12⌋, ⌊28/12⌋
	*now = now.Add(time.Hour)
	r.consolidate()
	check("4 of 12 buckets, merged", 1, 2)
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
