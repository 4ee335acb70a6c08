package expectations

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeCache is a Cache whose observed resourceVersion and objects a test sets.
type fakeCache struct {
	observed string
	objects  map[string]metav1.Object
}

func (f *fakeCache) cache() Cache {
	return Cache{
		Observed: func() string { return f.observed },
		Get: func(key string) (metav1.Object, bool) {
			o, ok := f.objects[key]
			return o, ok
		},
	}
}

func pod(name, uid, rv string, deleting bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// rywWrite is a write (or, deleted, a delete) a readYourWritesCase records
// for key "ns/rs".
type rywWrite struct {
	resource string
	obj      metav1.Object
	deleted  bool
}

// readYourWritesCase is one case of TestReadYourWritesCheck: the writes
// recorded, the caches, the time passed, and the verdict wanted.
type readYourWritesCase struct {
	name       string
	writes     []rywWrite
	pods, rss  fakeCache
	elapsed    time.Duration
	want       Freshness
	wantRecord bool
}

// readYourWritesCases are TestReadYourWritesCheck's cases.
func readYourWritesCases() []readYourWritesCase {
	return []readYourWritesCase{
		{name: "no writes", want: Fresh},
		{name: "create observed", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false)}},
			pods: fakeCache{observed: "100"}, want: Fresh},
		{name: "create newer than the cache", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false)}},
			pods: fakeCache{observed: "99"}, want: Behind, wantRecord: true},
		{name: "resourceVersions compare numerically", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "1000", false)}},
			pods: fakeCache{observed: "999"}, want: Behind, wantRecord: true},
		{name: "the newest write counts", writes: []rywWrite{
			{resource: "pods", obj: pod("a", "1", "120", false)}, {resource: "pods", obj: pod("b", "2", "110", false)}},
			pods: fakeCache{observed: "115"}, want: Behind, wantRecord: true},
		{name: "each resource against its own cache", writes: []rywWrite{
			{resource: "pods", obj: pod("a", "1", "100", false)}, {resource: "replicasets", obj: pod("rs", "9", "105", false)}},
			pods: fakeCache{observed: "200"}, rss: fakeCache{observed: "104"}, want: Behind, wantRecord: true},
		{name: "unknown observed resourceVersion never blocks", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false)}},
			want: Fresh},
		{name: "empty written resourceVersion ignored", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "", false)}},
			pods: fakeCache{observed: "5"}, want: Fresh},
		{name: "resource without a cache never blocks", writes: []rywWrite{{resource: "nodes", obj: pod("n", "1", "100", false)}},
			want: Fresh},
		{name: "delete: object still live in the cache", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false), deleted: true}},
			pods: fakeCache{observed: "300", objects: map[string]metav1.Object{"ns/a": pod("a", "1", "100", false)}},
			want: Behind, wantRecord: true},
		{name: "delete: cache shows the deletionTimestamp", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false), deleted: true}},
			pods: fakeCache{objects: map[string]metav1.Object{"ns/a": pod("a", "1", "101", true)}}, want: Fresh},
		{name: "delete: object gone from the cache", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false), deleted: true}},
			want: Fresh},
		{name: "delete: same name, other UID", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false), deleted: true}},
			pods: fakeCache{objects: map[string]metav1.Object{"ns/a": pod("a", "2", "150", false)}}, want: Fresh},
		{name: "behind up to the cap", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false)}},
			pods: fakeCache{observed: "99"}, elapsed: DefaultMaxCacheWait, want: Behind, wantRecord: true},
		{name: "stale after the cap, and the record is kept", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false)}},
			pods: fakeCache{observed: "99"}, elapsed: DefaultMaxCacheWait + time.Second, want: Stale, wantRecord: true},
		{name: "a delete stays stale after the cap", writes: []rywWrite{{resource: "pods", obj: pod("a", "1", "100", false), deleted: true}},
			pods:    fakeCache{objects: map[string]metav1.Object{"ns/a": pod("a", "1", "100", false)}},
			elapsed: 10 * DefaultMaxCacheWait, want: Stale, wantRecord: true},
	}
}

// TestReadYourWritesCheck covers the verdicts of the IM-4 guard for writes
// (resourceVersion) and deletes (UID), and the wait cap.
func TestReadYourWritesCheck(t *testing.T) {
	cases := readYourWritesCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			g := NewReadYourWrites("test-"+tc.name, clk, 0, map[string]Cache{"pods": tc.pods.cache(), "replicasets": tc.rss.cache()})
			for _, w := range tc.writes {
				if w.deleted {
					g.Deleted("ns/rs", w.resource, w.obj)
				} else {
					g.Written("ns/rs", w.resource, w.obj)
				}
			}
			clk.Step(tc.elapsed)
			if got := g.Check(logger, "ns/rs"); got != tc.want {
				t.Errorf("Check = %v, want %v", got, tc.want)
			}
			if got := g.Pending("ns/rs"); got != tc.wantRecord {
				t.Errorf("Pending = %v, want %v", got, tc.wantRecord)
			}
		})
	}
}

// podsGuard is a ReadYourWrites guard over one pods cache, with its fake
// clock and a test logger, for tests about the writes of key "ns/rs".
type podsGuard struct {
	*ReadYourWrites
	pods   *fakeCache
	clk    *clocktesting.FakeClock
	logger klog.Logger
}

// newPodsGuard returns a podsGuard for controller whose pods cache has
// observed resourceVersion observedRV.
func newPodsGuard(t *testing.T, controller, observedRV string) *podsGuard {
	logger, _ := ktesting.NewTestContext(t)
	g := &podsGuard{pods: &fakeCache{observed: observedRV}, clk: clocktesting.NewFakeClock(time.Now()), logger: logger}
	g.ReadYourWrites = NewReadYourWrites(controller, g.clk, 0, map[string]Cache{"pods": g.pods.cache()})
	return g
}

// writePod records a write of pod ns/a at resourceVersion rv for "ns/rs".
func (g *podsGuard) writePod(rv string) { g.Written("ns/rs", "pods", pod("a", "1", rv, false)) }

func (g *podsGuard) check() Freshness { return g.Check(g.logger, "ns/rs") }

// TestReadYourWritesNeverExpires proves the IM-4 rewrite: however long the
// cache stays behind (here 10× the expectations TTL), Check never says Fresh,
// and it says Fresh as soon as the cache shows the write.
func TestReadYourWritesNeverExpires(t *testing.T) {
	g := newPodsGuard(t, "never-expires", "10")
	g.writePod("11")
	for i := 0; i < 50; i++ {
		if got := g.check(); got == Fresh {
			t.Fatalf("after %v: Check = Fresh with the cache behind our write", time.Duration(i)*time.Minute)
		}
		g.clk.Step(time.Minute)
	}
	g.pods.observed = "11"
	if got := g.check(); got != Fresh {
		t.Fatalf("Check = %v once the cache caught up, want Fresh", got)
	}
	if g.Pending("ns/rs") {
		t.Fatal("record kept after the cache caught up")
	}
}

// TestReadYourWritesWaitStartsAtOldestUnshownWrite: later writes do not
// restart the wait, so a key that keeps writing still reaches Stale.
func TestReadYourWritesWaitStartsAtOldestUnshownWrite(t *testing.T) {
	g := newPodsGuard(t, "oldest", "1")
	g.MaxWait = 10 * time.Second
	for rv := 2; rv < 8; rv++ {
		g.writePod(string(rune('0' + rv)))
		g.clk.Step(2 * time.Second)
	}
	if got := g.check(); got != Stale {
		t.Fatalf("Check = %v after 12s of continuous writes with the cache behind, want Stale", got)
	}
}

// TestReadYourWritesForget drops a record whatever the cache shows (RS-2, RS-11).
func TestReadYourWritesForget(t *testing.T) {
	g := newPodsGuard(t, "forget", "1")
	g.writePod("5")
	g.Forget("ns/rs")
	if got := g.check(); got != Fresh {
		t.Fatalf("Check after Forget = %v, want Fresh", got)
	}
}

// TestReadYourWritesMetrics: every Behind and Stale verdict is counted.
func TestReadYourWritesMetrics(t *testing.T) {
	g := newPodsGuard(t, "metrics-test", "1")
	g.writePod("5")
	g.check()
	g.check()
	g.clk.Step(2 * DefaultMaxCacheWait)
	g.check()
	waits, err := testutil.GetCounterMetricValue(cacheBehindWaits.WithLabelValues("metrics-test"))
	if err != nil || waits != 2 {
		t.Errorf("waits = %v (%v), want 2", waits, err)
	}
	reads, err := testutil.GetCounterMetricValue(cacheBehindLiveReads.WithLabelValues("metrics-test"))
	if err != nil || reads != 1 {
		t.Errorf("live reads = %v (%v), want 1", reads, err)
	}
}

// TestReadYourWritesNextCheck: only a Stale sync is rechecked, within MaxWait.
func TestReadYourWritesNextCheck(t *testing.T) {
	g := NewReadYourWrites("next-check", nil, 0, nil)
	cases := []struct {
		f           Freshness
		after, want time.Duration
	}{
		{Fresh, 0, 0},
		{Fresh, 5 * time.Minute, 5 * time.Minute},
		{Stale, 0, DefaultMaxCacheWait},
		{Stale, time.Second, time.Second},
		{Stale, 5 * time.Minute, DefaultMaxCacheWait},
	}
	for _, tc := range cases {
		if got := g.NextCheck(tc.f, tc.after); got != tc.want {
			t.Errorf("NextCheck(%v, %v) = %v, want %v", tc.f, tc.after, got, tc.want)
		}
	}
}
