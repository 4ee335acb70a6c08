package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2/ktesting"
)

// fastDurations keep the scenarios short; RenewDeadline < LeaseDuration as leader election requires.
var fastDurations = Durations{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}

// newRingClient is a fake clientset whose ConfigMaps and Leases keep resourceVersions and refuse an update at
// a stale one, as the API server does (SH-7 rests on it).
func newRingClient() *fake.Clientset {
	client := fake.NewClientset()
	var rv atomic.Int64
	keepVersions(client, &rv, v1.SchemeGroupVersion.WithResource("configmaps"))
	keepVersions(client, &rv, coordinationv1.SchemeGroupVersion.WithResource("leases"))
	return client
}

// keepVersions makes client's creates and updates of gvr set a new resourceVersion from rv, and refuse an
// update at a stale one with Conflict.
func keepVersions(client *fake.Clientset, rv *atomic.Int64, gvr schema.GroupVersionResource) {
	client.PrependReactor("create", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().DeepCopyObject()
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		if err := client.Tracker().Create(gvr, obj, m.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	client.PrependReactor("update", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().DeepCopyObject()
		m, _ := meta.Accessor(obj)
		cur, err := client.Tracker().Get(gvr, m.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		if c, _ := meta.Accessor(cur); c.GetResourceVersion() != m.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(), errors.New("stale resourceVersion"))
		}
		m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		return true, obj, client.Tracker().Update(gvr, obj, m.GetNamespace())
	})
}

// cutClient is a replica's client whose Lease writes fail while cut is set: it cannot renew, as if the API
// server could not be reached for them.
type cutClient struct {
	kubernetes.Interface
	cut *atomic.Bool
}

// IsWatchListSemanticsUnSupported passes the fake clientset's watch-list opt-out through the wrapper.
func (c cutClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c cutClient) CoordinationV1() coordinationclient.CoordinationV1Interface {
	return cutCoordination{c.Interface.CoordinationV1(), c.cut}
}

type cutCoordination struct {
	coordinationclient.CoordinationV1Interface
	cut *atomic.Bool
}

func (c cutCoordination) Leases(ns string) coordinationclient.LeaseInterface {
	return cutLeases{c.CoordinationV1Interface.Leases(ns), c.cut}
}

type cutLeases struct {
	coordinationclient.LeaseInterface
	cut *atomic.Bool
}

var errCut = errors.New("cut off by the test")

func (l cutLeases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.cut.Load() {
		return nil, errCut
	}
	return l.LeaseInterface.Update(ctx, lease, o)
}

func (l cutLeases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if l.cut.Load() {
		return nil, errCut
	}
	return l.LeaseInterface.Create(ctx, lease, o)
}

// recorder is every replica's Runner: it records what runs, and a sampler checks SH-1 all along: no bucket
// is ever run by two replicas whose fences both hold.
type recorder struct {
	// cluster is namespace → pods, what a run's caches hold of its range once visible (nil: always) says so.
	cluster map[string]int
	visible *atomic.Bool
	// surge, if set, is what a rollout adds to a namespace's cached pods now (Pods, not Steady).
	surge func(namespace string) int

	mu         sync.Mutex
	runs       map[int][]*fakeRun
	violations []string
}

type fakeRun struct {
	id      string
	fence   *Fence
	rng     Range
	cluster map[string]int
	visible *atomic.Bool
	surge   func(namespace string) int
	live    atomic.Bool
}

func (r *fakeRun) Stop()           { r.live.Store(false) }
func (r *fakeRun) HasSynced() bool { return true }

// Pods counts the recorder's cluster in the run's range, and what a rollout adds to it now.
func (r *fakeRun) Pods() (pods, nss int) {
	pods, nss = r.Steady()
	if r.surge != nil && (r.visible == nil || r.visible.Load()) {
		for ns := range r.cluster {
			if r.rng.Contains(ns) {
				pods += r.surge(ns)
			}
		}
	}
	return pods, nss
}

// Steady counts the recorder's cluster in the run's range: it holds steady counts.
func (r *fakeRun) Steady() (pods, nss int) {
	if r.visible != nil && !r.visible.Load() {
		return 0, 0
	}
	for ns, p := range r.cluster {
		if r.rng.Contains(ns) {
			pods, nss = pods+p, nss+1
		}
	}
	return pods, nss
}

func (r *recorder) runner(id string) Runner { return runnerFunc{r, id} }

type runnerFunc struct {
	r  *recorder
	id string
}

func (f runnerFunc) Start(_ context.Context, c Claim) (Running, error) {
	run := &fakeRun{id: f.id, fence: c.Fence, rng: c.Range, cluster: f.r.cluster, visible: f.r.visible, surge: f.r.surge}
	run.live.Store(true)
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if c.Of < 1 || c.Bucket >= c.Of {
		// the manager divides --concurrent-*-syncs by the share Of gives
		f.r.violations = append(f.r.violations, fmt.Sprintf("%s: the claim of bucket %d says the ring has %d buckets", f.id, c.Bucket, c.Of))
	}
	f.r.runs[c.Bucket] = append(f.r.runs[c.Bucket], run)
	return run, nil
}

// sample records a violation for every two acting runs (running, fence valid) whose ranges overlap: the same
// bucket, or old and new bounds across a re-split.
func (r *recorder) sample() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var acting []*fakeRun
	for _, runs := range r.runs {
		for _, run := range runs {
			if run.live.Load() && run.fence.Valid() {
				acting = append(acting, run)
			}
		}
	}
	for i, x := range acting {
		for _, y := range acting[i+1:] {
			if x.rng.Start <= y.rng.Last && y.rng.Start <= x.rng.Last {
				r.violations = append(r.violations, fmt.Sprintf("%s %v and %s %v act at once", x.id, x.rng, y.id, y.rng))
			}
		}
	}
}

// replica is one coordinator under test.
type replica struct {
	c      *Coordinator
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, client kubernetes.Interface, rec *recorder, id string) *replica {
	t.Helper()
	return startReplicaWith(t, client, rec, Config{Identity: id,
		Measure: func(context.Context) (map[string]int, error) { return sequential("ns-%02d", 20, 5), nil }})
}

// startReplicaWith starts a coordinator of cfg (Identity and Measure set) over cfg.Buckets buckets (default 4)
// with fastDurations.
func startReplicaWith(t *testing.T, client kubernetes.Interface, rec *recorder, cfg Config) *replica {
	t.Helper()
	r := &replica{done: make(chan error, 1)}
	cfg.Client, cfg.Namespace, cfg.Buckets, cfg.Durations = cutClient{client, &r.cut}, "kube-system", cmp.Or(cfg.Buckets, 4), fastDurations
	cfg.Runner = rec.runner(cfg.Identity)
	r.c = NewCoordinator(cfg)
	_, ctx := ktesting.NewTestContext(t)
	ctx, r.cancel = context.WithCancel(ctx)
	go func() { r.done <- r.c.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
	r.done <- nil
}

// waitRunning waits until each replica runs the given number of buckets.
func waitRunning(t *testing.T, what string, want map[*replica]int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for r, n := range want {
			ok = ok && len(r.c.Running()) == n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			got := map[string][]int{}
			for r := range want {
				got[r.c.cfg.Identity] = r.c.Running()
			}
			t.Fatalf("%s: running %v", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
