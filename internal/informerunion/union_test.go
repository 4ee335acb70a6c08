package informerunion

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
)

// bucket is one member for a test: a fake source of pods and an informer over it, started by start.
type bucket struct {
	source *fcache.FakeControllerSource
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}
}

// newBucket returns a member informer over a fake source holding pods (namespace/name each).
func newBucket(t *testing.T, pods ...string) *bucket {
	t.Helper()
	b := &bucket{source: fcache.NewFakeControllerSource()}
	for _, p := range pods {
		b.source.Add(pod(p))
	}
	b.inf = cache.NewSharedIndexInformer(b.source, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return b
}

func pod(key string) *v1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
}

// start runs the member until stop or the end of the test, and waits for it to sync.
func (b *bucket) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go func() { b.inf.RunWithContext(ctx); close(b.done) }()
	t.Cleanup(b.stop)
	waitFor(t, "a member to sync", b.inf.HasSynced)
}

// stop stops the member and waits for its informer to return.
func (b *bucket) stop() {
	if b.cancel != nil {
		b.cancel()
		<-b.done
		b.cancel = nil
	}
}

// inPrefix is a member's namespaces: those starting with p.
func inPrefix(p string) func(string) bool {
	return func(ns string) bool { return strings.HasPrefix(ns, p) }
}

// recorder is a handler that records its calls ("add a-1/x", "update …", "delete …", "tombstone …") and
// whether two ever overlapped.
type recorder struct {
	mu      sync.Mutex
	calls   []string
	running atomic.Int32
	overlap atomic.Bool
}

func (r *recorder) record(what string, obj any) {
	if r.running.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.running.Add(-1)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		what, obj = "tombstone", t.Obj
	}
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	r.mu.Lock()
	r.calls = append(r.calls, what+" "+key)
	r.mu.Unlock()
}

func (r *recorder) OnAdd(obj any, _ bool) { r.record("add", obj) }
func (r *recorder) OnUpdate(_, obj any)   { r.record("update", obj) }
func (r *recorder) OnDelete(obj any)      { r.record("delete", obj) }
func (r *recorder) has(call string) func() bool {
	return func() bool { r.mu.Lock(); defer r.mu.Unlock(); return slices.Contains(r.calls, call) }
}

func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// TestHandlersReachEveryMember: a handler added before any member, and one added after a member started, both
// see every member's objects and events, members added before or after they were registered, started before
// or after they were added; each registration syncs only once it has been given every member's objects.
func TestHandlersReachEveryMember(t *testing.T) {
	u := New(nil)
	early := &recorder{}
	earlyReg, err := u.AddEventHandler(early)
	if err != nil {
		t.Fatal(err)
	}
	a := newBucket(t, "a-1/x", "a-2/y")
	if err := u.Add(1, inPrefix("a-"), a.inf); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	late := &recorder{}
	lateReg, err := u.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	b := newBucket(t, "b-1/z")
	b.start(t)
	if err := u.Add(2, inPrefix("b-"), b.inf); err != nil { // added after it started: replayed as adds
		t.Fatal(err)
	}
	for _, rec := range []*recorder{early, late} {
		for _, call := range []string{"add a-1/x", "add a-2/y", "add b-1/z"} {
			waitFor(t, call, rec.has(call))
		}
	}
	waitFor(t, "both registrations to sync", func() bool { return earlyReg.HasSynced() && lateReg.HasSynced() && u.HasSynced() })
	b.source.Modify(pod("b-1/z"))
	a.source.Delete(pod("a-2/y"))
	for _, rec := range []*recorder{early, late} {
		waitFor(t, "the update of b-1/z", rec.has("update b-1/z"))
		waitFor(t, "the delete of a-2/y", rec.has("delete a-2/y"))
		if rec.overlap.Load() {
			t.Error("a handler was called by two members at once")
		}
	}
	if !u.MemberSynced(1) || !u.MemberSynced(2) || u.MemberSynced(3) {
		t.Errorf("MemberSynced(1, 2, 3) = %v, %v, %v; want true, true, false", u.MemberSynced(1), u.MemberSynced(2), u.MemberSynced(3))
	}
}

// TestIndexerRoutesByNamespace: a key and a NamespaceIndex value are read from the member holding their
// namespace only (an object of a-1 that member b happens to hold is not seen); other indexes, List and the
// index values are read over every member (SH-9's union of bucket caches).
func TestIndexerRoutesByNamespace(t *testing.T) {
	u := New(cache.Indexers{"app": func(obj any) ([]string, error) { return []string{obj.(*v1.Pod).Labels["app"]}, nil }})
	a, b := newBucket(t, "a-1/x", "a-1/y"), newBucket(t, "b-1/x", "a-1/stray")
	for i, m := range []*bucket{a, b} {
		if err := u.Add(i+1, inPrefix(string(rune('a'+i))+"-"), m.inf); err != nil {
			t.Fatal(err)
		}
		m.start(t)
	}
	x := u.GetIndexer()
	cases := []struct {
		name string
		read func() ([]any, error)
		want []string
	}{
		{name: "GetByKey a-1/x", read: getByKey(x, "a-1/x"), want: []string{"a-1/x"}},
		{name: "GetByKey b-1/x", read: getByKey(x, "b-1/x"), want: []string{"b-1/x"}},
		{name: "GetByKey routed away from a stray", read: getByKey(x, "a-1/stray")},
		{name: "GetByKey of a namespace no member holds", read: getByKey(x, "c-1/x")},
		{name: "ByIndex namespace a-1", read: func() ([]any, error) { return x.ByIndex(cache.NamespaceIndex, "a-1") },
			want: []string{"a-1/x", "a-1/y"}},
		{name: "ByIndex app x over every member", read: func() ([]any, error) { return x.ByIndex("app", "x") },
			want: []string{"a-1/x", "b-1/x"}},
		{name: "List", read: func() ([]any, error) { return x.List(), nil },
			want: []string{"a-1/stray", "a-1/x", "a-1/y", "b-1/x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(objs); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got, want := x.ListIndexFuncValues("app"), []string{"stray", "x", "y"}; !slices.Equal(got, want) {
		t.Errorf("ListIndexFuncValues(app) = %v, want %v", got, want)
	}
	if _, ok := x.GetIndexers()["app"]; !ok {
		t.Error("the union's indexers lack the one it was built with")
	}
}

func getByKey(x cache.Indexer, key string) func() ([]any, error) {
	return func() ([]any, error) {
		obj, ok, err := x.GetByKey(key)
		if !ok {
			return nil, err
		}
		return []any{obj}, err
	}
}

// keys returns the objects' keys, sorted.
func keys(objs []any) []string {
	out := []string{}
	for _, o := range objs {
		k, _ := cache.MetaNamespaceKeyFunc(o)
		out = append(out, k)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// TestRemovedMemberDisappears: a member removed leaves List and every read at once, its objects are given to
// the handlers as tombstones, and nothing of it reaches them after; the other member is untouched.
func TestRemovedMemberDisappears(t *testing.T) {
	u := New(nil)
	rec := &recorder{}
	if _, err := u.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	a, b := newBucket(t, "a-1/x"), newBucket(t, "b-1/x", "b-2/y")
	for i, m := range []*bucket{a, b} {
		if err := u.Add(i+1, inPrefix(string(rune('a'+i))+"-"), m.inf); err != nil {
			t.Fatal(err)
		}
		m.start(t)
	}
	waitFor(t, "every add", func() bool { return rec.count("add ") == 3 })
	b.stop()
	if inf, ok := u.Remove(2); !ok || inf != b.inf {
		t.Fatalf("Remove(2) = %v, %v; want member b's informer", inf, ok)
	}
	if got := keys(u.GetIndexer().List()); !slices.Equal(got, []string{"a-1/x"}) {
		t.Errorf("List after removing b = %v, want [a-1/x]", got)
	}
	if _, ok, _ := u.GetIndexer().GetByKey("b-1/x"); ok {
		t.Error("b-1/x is still read after its member was removed")
	}
	if got := rec.count("tombstone b-"); got != 2 {
		t.Errorf("%d tombstones of b's objects, want 2: %v", got, rec.calls)
	}
	a.source.Modify(pod("a-1/x"))
	waitFor(t, "a's update", rec.has("update a-1/x"))
	if got := u.Members(); !slices.Equal(got, []int{1}) {
		t.Errorf("Members() = %v, want [1]", got)
	}
	if _, ok := u.Remove(2); ok {
		t.Error("Remove of a removed member reported one")
	}
}

// TestNamespacedVersions: the version a key's writes are compared with (IM-4) is its own member's store's.
func TestNamespacedVersions(t *testing.T) {
	u := New(nil)
	a, b := newBucket(t, "a-1/x"), newBucket(t, "b-1/x")
	for i, m := range []*bucket{a, b} {
		if err := u.Add(i+1, inPrefix(string(rune('a'+i))+"-"), m.inf); err != nil {
			t.Fatal(err)
		}
		m.start(t)
	}
	for range 3 {
		b.source.Modify(pod("b-1/x")) // b's store moves ahead of a's
	}
	nv := u.GetIndexer().(interface{ LastStoreSyncResourceVersionIn(string) string })
	version := func(m *bucket) string {
		if rv := m.inf.GetIndexer().LastStoreSyncResourceVersion(); rv != "" {
			return rv
		}
		return m.inf.LastSyncResourceVersion()
	}
	waitFor(t, "b's store to apply the updates", func() bool {
		obj, ok, _ := b.inf.GetIndexer().GetByKey("b-1/x")
		return ok && obj.(*v1.Pod).ResourceVersion == "4" && version(b) != version(a)
	})
	for ns, m := range map[string]*bucket{"a-1": a, "b-1": b} {
		if got, want := nv.LastStoreSyncResourceVersionIn(ns), version(m); got != want {
			t.Errorf("version for %s = %q, want its member's %q", ns, got, want)
		}
	}
	if got := nv.LastStoreSyncResourceVersionIn("c-1"); got != "" {
		t.Errorf("version for a namespace no member holds = %q, want \"\"", got)
	}
}

// TestFactoryGivesUnions: the factory's Deployment, ReplicaSet and pod informers are its unions, whichever
// way they are asked for; nodes are the base factory's.
func TestFactoryGivesUnions(t *testing.T) {
	f := NewFactory(informers.NewSharedInformerFactory(fake.NewClientset(), 0))
	if got, want := f.Core().V1().Pods().Informer(), cache.SharedIndexInformer(f.Union(Pods)); got != want {
		t.Error("Core().V1().Pods() is not the pod union")
	}
	if f.InformerFor(&appsv1.Deployment{}, nil) != f.Apps().V1().Deployments().Informer() {
		t.Error("InformerFor(deployment) is not Apps().V1().Deployments()'s union")
	}
	if f.InformerFor(&v1.Pod{}, nil) != cache.SharedIndexInformer(f.Union(Pods)) {
		t.Error("InformerFor(pod) is not the pod union")
	}
	if _, ok := f.Apps().V1().ReplicaSets().Informer().(*Informer); !ok {
		t.Error("Apps().V1().ReplicaSets() is not a union")
	}
	if _, ok := f.Core().V1().Nodes().Informer().(*Informer); ok {
		t.Error("nodes are a union; want the base factory's")
	}
	if got := len(f.Unions()); got != 3 {
		t.Errorf("%d unions asked for, want 3", got)
	}
	if _, err := f.Core().V1().Pods().Lister().Pods("a").Get("x"); err == nil {
		t.Error("a pod found in an empty union")
	}
}

// waitFor polls cond every millisecond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
