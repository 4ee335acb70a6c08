package runner

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
)

// prefix returns a part's namespaces: those that start with p.
func prefix(p string) func(string) bool {
	return func(ns string) bool { return strings.HasPrefix(ns, p) }
}

// TestScopeAdmission: a runner with a Scope enqueues only the keys of admitted namespaces, by every enqueue
// path; a nil Scope admits all (SH-4, SH-9).
func TestScopeAdmission(t *testing.T) {
	cases := []struct {
		name    string
		scope   func() *Scope
		ns      string
		enqueue func(r *Runner, key cache.ObjectName)
		want    bool
	}{
		{name: "nil scope admits all", scope: func() *Scope { return nil }, ns: "b-1", enqueue: (*Runner).Enqueue, want: true},
		{name: "admitted", scope: admittedA, ns: "a-1", enqueue: (*Runner).Enqueue, want: true},
		{name: "not admitted", scope: admittedA, ns: "b-1", enqueue: (*Runner).Enqueue},
		{name: "coalesced not admitted", scope: admittedA, ns: "b-1",
			enqueue: func(r *Runner, k cache.ObjectName) { r.EnqueueCoalesced(k, time.Hour) }},
		{name: "after not admitted", scope: admittedA, ns: "b-1",
			enqueue: func(r *Runner, k cache.ObjectName) { r.EnqueueAfter(k, 0) }},
		{name: "coalesced admitted", scope: admittedA, ns: "a-1", want: true,
			enqueue: func(r *Runner, k cache.ObjectName) { r.EnqueueCoalesced(k, time.Hour) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := New("test", nil, WithScope(tc.scope()))
			defer r.queue.ShutDown()
			tc.enqueue(r, cache.ObjectName{Namespace: tc.ns, Name: "x"})
			if got := r.Len() == 1; got != tc.want {
				t.Errorf("queued = %v, want %v", got, tc.want)
			}
		})
	}
}

func admittedA() *Scope {
	s := NewScope()
	s.Admit(1, prefix("a-"))
	return s
}

// TestScopeAdmitHooks: Admit calls Forget before the namespaces are admitted (so that no sync of theirs runs
// on remembered expectations, SH-3) and Admitted after (so that the keys it enqueues are kept).
func TestScopeAdmitHooks(t *testing.T) {
	s := NewScope()
	var seen []string
	s.Watch(ScopeHooks{
		Forget: func(in func(string) bool) {
			seen = append(seen, "forget", map[bool]string{true: "admitted", false: "not admitted"}[s.Admits("a-1")])
		},
		Admitted: func(in func(string) bool) {
			seen = append(seen, "admitted", map[bool]string{true: "admitted", false: "not admitted"}[s.Admits("a-1")])
		},
	})
	s.Admit(1, prefix("a-"))
	want := []string{"forget", "not admitted", "admitted", "admitted"}
	if !slices.Equal(seen, want) {
		t.Errorf("hooks saw %v, want %v", seen, want)
	}
	if s.Drop(context.Background(), 1); s.Admits("a-1") {
		t.Error("a-1 admitted after its part was dropped")
	}
}

// blockingSyncs is a SyncFunc whose syncs of a key wait until the key is released, recording each sync's
// context.
type blockingSyncs struct {
	mu       sync.Mutex
	started  map[string]chan struct{}
	release  map[string]chan struct{}
	ctxs     map[string]context.Context
	synced   []string
	finished []string
}

func newBlockingSyncs(keys ...string) *blockingSyncs {
	b := &blockingSyncs{started: map[string]chan struct{}{}, release: map[string]chan struct{}{}, ctxs: map[string]context.Context{}}
	for _, k := range keys {
		b.started[k], b.release[k] = make(chan struct{}), make(chan struct{})
	}
	return b
}

func (b *blockingSyncs) sync(ctx context.Context, key cache.ObjectName) (Result, error) {
	k := key.String()
	b.mu.Lock()
	b.synced = append(b.synced, k)
	b.ctxs[k] = ctx
	started, release := b.started[k], b.release[k]
	b.mu.Unlock()
	if started != nil {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	b.mu.Lock()
	b.finished = append(b.finished, k)
	b.mu.Unlock()
	return Result{}, ctx.Err()
}

func (b *blockingSyncs) ctx(k string) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctxs[k]
}

func (b *blockingSyncs) record() (synced, finished []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.synced), slices.Clone(b.finished)
}

// runScoped runs a runner of 2 workers over sync with s until the test ends.
func runScoped(t *testing.T, s *Scope, sync SyncFunc) *Runner {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	r := New("test", sync, WithScope(s),
		WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)))
	done := make(chan struct{})
	go func() { r.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// twoPartsInFlight runs a scoped runner of 2 workers with parts 1 (namespaces "a-…") and 2 ("b-…") admitted,
// and returns once a sync of a-1/x and one of b-1/x are both in flight, blocked until released.
func twoPartsInFlight(t *testing.T) (*Scope, *blockingSyncs, *Runner) {
	t.Helper()
	s := NewScope()
	s.Admit(1, prefix("a-"))
	s.Admit(2, prefix("b-"))
	b := newBlockingSyncs("a-1/x", "b-1/x")
	r := runScoped(t, s, b.sync)
	r.Enqueue(cache.ObjectName{Namespace: "a-1", Name: "x"})
	r.Enqueue(cache.ObjectName{Namespace: "b-1", Name: "x"})
	<-b.started["a-1/x"]
	<-b.started["b-1/x"]
	return s, b, r
}

// TestScopeDropDrainsOnlyItsPart: dropping part a while a sync of a-1 and one of b-1 are in flight and a key of
// a-2 waits in the queue: Drop returns only once a-1's sync finished, by itself (its context never
// cancelled); a-2 is never synced; b-1's sync is not cancelled and b's keys still sync (SH-9).
func TestScopeDropDrainsOnlyItsPart(t *testing.T) {
	s, b, r := twoPartsInFlight(t)
	r.Enqueue(cache.ObjectName{Namespace: "a-2", Name: "x"}) // both workers busy: it waits in the queue
	dropped := make(chan int)
	go func() { dropped <- s.Drop(context.Background(), 1) }()
	waitFor(t, "a-2 to be refused admission", func() bool { return !s.Admits("a-2") })
	select {
	case <-dropped:
		t.Fatal("Drop returned while a-1's sync was in flight")
	default:
	}
	close(b.release["a-1/x"])
	if n := <-dropped; n != 0 {
		t.Errorf("Drop cancelled %d syncs, want 0 (a-1's finished by itself)", n)
	}
	if err := b.ctx("a-1/x").Err(); err != context.Canceled { // exit cancels it once the sync returned
		t.Errorf("a-1's context after its sync: %v", err)
	}
	if err := b.ctx("b-1/x").Err(); err != nil {
		t.Errorf("b-1's sync was cancelled by a's drop: %v", err)
	}
	r.Enqueue(cache.ObjectName{Namespace: "b-2", Name: "x"})
	waitFor(t, "b-2 to sync", func() bool { synced, _ := b.record(); return slices.Contains(synced, "b-2/x") })
	close(b.release["b-1/x"])
	waitFor(t, "the queue to empty", func() bool { return r.Len() == 0 && len(s.InFlight()) == 0 })
	if synced, _ := b.record(); slices.Contains(synced, "a-2/x") {
		t.Errorf("a-2, queued before its part was dropped, was synced: %v", synced)
	}
}

// TestScopeDropCancelsPastItsDeadline: when Drop's context ends with a sync of the part still in flight, that
// sync's context is cancelled and Drop returns once it has returned; another part's sync is untouched.
func TestScopeDropCancelsPastItsDeadline(t *testing.T) {
	s, b, _ := twoPartsInFlight(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n := s.Drop(ctx, 1); n != 1 {
		t.Errorf("Drop cancelled %d syncs, want 1", n)
	}
	if _, finished := b.record(); !slices.Contains(finished, "a-1/x") {
		t.Errorf("Drop returned before a-1's sync did: finished %v", finished)
	}
	if err := b.ctx("b-1/x").Err(); err != nil {
		t.Errorf("b-1's sync was cancelled: %v", err)
	}
	close(b.release["b-1/x"])
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
