package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"
	testingclock "k8s.io/utils/clock/testing"
)

func nsTerminatingErr() error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("namespace is terminating"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}
	return err
}

type countingObserver struct{ errs []error }

func (o *countingObserver) SyncDone(_ string, _ time.Duration, err error) {
	o.errs = append(o.errs, err)
}

// TestProcessNextItem covers the retry policy (IM-5, RS-19, CM-3's
// NamespaceTerminating rule) and panic recovery.
func TestProcessNextItem(t *testing.T) {
	cases := []struct {
		name          string
		result        Result
		err           error
		panics        bool
		wantRequeues  int  // NumRequeues after the sync
		wantRequeued  bool // the key comes back (eventually)
		wantObsFailed bool
	}{
		{name: "success forgets"},
		{name: "error backs off", err: errors.New("boom"), wantRequeues: 1, wantRequeued: true, wantObsFailed: true},
		{name: "namespace terminating is forgotten", err: fmt.Errorf("wrapped: %w", nsTerminatingErr()), wantObsFailed: true},
		{name: "panic is an error", panics: true, wantRequeues: 1, wantRequeued: true, wantObsFailed: true},
		{name: "requeue after is not a retry", result: Result{RequeueAfter: time.Millisecond}, wantRequeued: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			key := cache.ObjectName{Namespace: "ns", Name: "a"}
			obs := &countingObserver{}
			r := New("test", func(context.Context, cache.ObjectName) (Result, error) {
				if tc.panics {
					panic("strange object")
				}
				return tc.result, tc.err
			}, WithObserver(obs), WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)))
			defer r.queue.ShutDown()
			q := recordQueue(r)
			r.Enqueue(key)
			if !r.ProcessNextItem(ctx) {
				t.Fatal("queue shut down unexpectedly")
			}
			if got := r.NumRequeues(key); got != tc.wantRequeues {
				t.Errorf("NumRequeues = %d, want %d", got, tc.wantRequeues)
			}
			if len(obs.errs) != 1 || (obs.errs[0] != nil) != tc.wantObsFailed {
				t.Errorf("observer saw %v", obs.errs)
			}
			// The key comes back if and only if the sync's outcome asked the
			// queue for it (recorded as asked, not polled for); one that must
			// come back is then seen in the queue (5 s: a bound for a slow
			// machine, not a measurement).
			if requeued := len(q.delayed()) > 0; requeued != tc.wantRequeued {
				t.Errorf("requeued = %v (%v), want %v", requeued, q.delayed(), tc.wantRequeued)
			}
			if tc.wantRequeued && waitForLen(r, 1) != 1 {
				t.Errorf("the requeued key did not come back to the queue")
			}
		})
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	synced := make(chan cache.ObjectName, 1)
	r := New("test", func(_ context.Context, key cache.ObjectName) (Result, error) {
		synced <- key
		return Result{}, nil
	})
	done := make(chan struct{})
	go func() { r.Run(ctx, 2); close(done) }()
	r.Enqueue(cache.ObjectName{Namespace: "ns", Name: "a"})
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("key never synced")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestIsNamespaceTerminating(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("x"), false},
		{"API error without the cause", apierrors.NewConflict(schema.GroupResource{}, "x", errors.New("c")), false},
		{"API error with the cause", nsTerminatingErr(), true},
		{"wrapped", fmt.Errorf("create: %w", nsTerminatingErr()), true},
	}
	for _, tc := range cases {
		if got := IsNamespaceTerminating(tc.err); got != tc.want {
			t.Errorf("%s: IsNamespaceTerminating = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestObjectFrom(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	cases := []struct {
		name string
		obj  any
		ok   bool
	}{
		{"object", p, true},
		{"tombstone", cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p}, true},
		{"wrong type", &v1.Node{}, false},
		{"tombstone of the wrong type", cache.DeletedFinalStateUnknown{Key: "n", Obj: &v1.Node{}}, false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		got, ok := ObjectFrom[*v1.Pod](logger, tc.obj)
		if ok != tc.ok || (ok && got != p) {
			t.Errorf("%s: ObjectFrom = %v, %v; want ok=%v", tc.name, got, ok, tc.ok)
		}
	}
}

// TestWaitingIsRetriedNotDropped: an expected wait (IM-4) is retried with
// backoff like any error (IM-5), never forgotten.
func TestWaitingIsRetriedNotDropped(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "rs"}
	calls := 0
	r := New("test", func(context.Context, cache.ObjectName) (Result, error) {
		calls++
		return Result{}, fmt.Errorf("cache behind: %w", ErrWaiting)
	}, WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)))
	r.Enqueue(key)
	ctx := context.Background()
	r.ProcessNextItem(ctx)
	if got := r.NumRequeues(key); got != 1 {
		t.Fatalf("NumRequeues = %d after a wait, want 1", got)
	}
	r.ProcessNextItem(ctx)
	if calls != 2 {
		t.Fatalf("sync called %d times, want 2 (the key must come back)", calls)
	}
}

// TestConflictsAreRetriedQuietly: an expected write conflict (a 409, or an
// error wrapping ErrConflict) is retried with backoff like any error (IM-5)
// and logged only from V(2), so ordinary optimistic concurrency does not
// flood the log (issue 9); at V(2) it is still visible.
func TestConflictsAreRetriedQuietly(t *testing.T) {
	for name, syncErr := range map[string]error{
		"409":         apierrors.NewConflict(schema.GroupResource{Resource: "replicasets"}, "rs", errors.New("modified")),
		"ErrConflict": fmt.Errorf("refused patch: %w", ErrConflict),
	} {
		for _, verbosity := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s at V(%d)", name, verbosity), func(t *testing.T) {
				var logs bytes.Buffer
				ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs), textlogger.Verbosity(verbosity))))
				key := cache.ObjectName{Namespace: "ns", Name: "rs"}
				r := New("test", func(context.Context, cache.ObjectName) (Result, error) { return Result{}, syncErr },
					WithRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)))
				r.Enqueue(key)
				r.ProcessNextItem(ctx)
				if got := r.NumRequeues(key); got != 1 {
					t.Errorf("NumRequeues = %d after a conflict, want 1", got)
				}
				if logged := strings.Contains(logs.String(), "write conflict"); logged != (verbosity >= 2) {
					t.Errorf("conflict logged = %v at V(%d), want %v:\n%s", logged, verbosity, verbosity >= 2, logs.String())
				}
			})
		}
	}
}

// TestEnqueueCoalesced: a key not synced lately is queued at once; one whose
// sync began less than the window ago waits for the rest of the window, and
// the events of that wait cost one sync, not one each (issue 10).
func TestEnqueueCoalesced(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	syncs := 0
	clk := testingclock.NewFakeClock(time.Now())
	r := New("test", func(context.Context, cache.ObjectName) (Result, error) { syncs++; return Result{}, nil }, WithClock(clk))
	defer r.queue.ShutDown()
	q := recordQueue(r)
	window := 300 * time.Millisecond

	r.EnqueueCoalesced(key, window)
	if r.Len() != 1 {
		t.Fatalf("a key never synced: queue length %d, want 1 at once", r.Len())
	}
	r.ProcessNextItem(ctx) // its sync begins now
	clk.Step(100 * time.Millisecond)
	for range 5 {
		r.EnqueueCoalesced(key, window)
	}
	// Not queued at once (the fake clock has not moved, so nothing delayed
	// can be due), and asked for at the window's end: 200ms from now, each time.
	if r.Len() != 0 {
		t.Fatalf("within the window: queue length %d, want 0 until the window ends", r.Len())
	}
	// One delayed add reaches the queue: the other four are due at the same time, so the queue would keep
	// only that one anyway (issue 48).
	if d := q.delayed(); len(d) != 1 || d[0].delay != 200*time.Millisecond || d[0].rateLimited {
		t.Fatalf("coalesced adds %+v, want one: the key after the 200ms left of the window", d)
	}
	clk.Step(200 * time.Millisecond)
	if n := waitForLen(r, 1); n != 1 {
		t.Fatalf("after the window: queue length %d, want the key once", n)
	}
	r.ProcessNextItem(ctx)
	if syncs != 2 {
		t.Fatalf("%d syncs, want 2: one, then one for the five coalesced events", syncs)
	}
	clk.Step(time.Second)
	r.EnqueueCoalesced(key, window)
	r.EnqueueCoalesced(cache.ObjectName{Namespace: "ns", Name: "b"}, 0)
	if r.Len() != 2 {
		t.Fatalf("after a quiet window and with window 0: queue length %d, want both keys at once", r.Len())
	}
}

// TestDelayedAddsCoalesce (issue 48): a delayed add due no earlier than one already waiting is not handed to
// the queue (which would keep only the earlier); an earlier one is, and so is every add after the key has been
// taken from the queue or once the recorded add is due, so a wake-up is never lost where the queue would have
// kept it (a retry with backoff may replace the waiting add with an earlier one, which fires).
func TestDelayedAddsCoalesce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	clk := testingclock.NewFakeClock(time.Now())
	var results []Result
	r := New("test", func(context.Context, cache.ObjectName) (Result, error) {
		res := results[0]
		results = results[1:]
		return res, nil
	}, WithClock(clk))
	defer r.queue.ShutDown()
	q := recordQueue(r)
	delays := func() []time.Duration {
		var out []time.Duration
		for _, d := range q.delayed() {
			if !d.rateLimited {
				out = append(out, d.delay)
			}
		}
		return out
	}

	r.EnqueueAfter(key, 2*time.Second)
	r.EnqueueAfter(key, 3*time.Second) // later than the waiting one: not handed over
	r.EnqueueAfter(key, 2*time.Second) // as late: not handed over
	r.EnqueueAfter(key, time.Second)   // earlier: handed over
	if got := delays(); !slices.Equal(got, []time.Duration{2 * time.Second, time.Second}) {
		t.Fatalf("delayed adds handed to the queue: %v, want [2s 1s]", got)
	}
	r.EnqueueAfter(cache.ObjectName{Namespace: "ns", Name: "b"}, 3*time.Second) // another key: its own
	if got := delays(); len(got) != 3 {
		t.Fatalf("another key's delayed add was not handed over: %v", got)
	}

	// Once the key has been taken from the queue (here added at once, as a retry whose backoff replaced the
	// waiting add would be), the sync's RequeueAfter of 5s is handed over although the 1s add is not due yet.
	r.Enqueue(key)
	results = []Result{{RequeueAfter: 5 * time.Second}}
	r.ProcessNextItem(ctx)
	if got := delays(); len(got) != 4 || got[3] != 5*time.Second {
		t.Fatalf("after the key was taken, the sync's RequeueAfter was not handed over: %v", got)
	}

	// A recorded add that is past due no longer holds back a later one, even before its key is taken.
	c := cache.ObjectName{Namespace: "ns", Name: "c"}
	r.EnqueueAfter(c, 500*time.Millisecond)
	clk.Step(500 * time.Millisecond)
	r.EnqueueAfter(c, time.Second)
	if got := delays(); len(got) != 6 || got[5] != time.Second {
		t.Fatalf("an add recorded as due held back a later one: %v", got)
	}
}

// recordingQueue is a Runner's queue that also records every delayed add:
// AddAfter with its delay, and AddRateLimited (a retry with backoff). Tests
// read what the runner asked of the queue from it instead of waiting to see
// that a key did not come.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	mu   sync.Mutex
	adds []delayedAdd
}

// delayedAdd is one recorded delayed add.
type delayedAdd struct {
	key         cache.ObjectName
	delay       time.Duration
	rateLimited bool
}

// recordQueue puts a recordingQueue in front of r's queue and returns it.
func recordQueue(r *Runner) *recordingQueue {
	q := &recordingQueue{TypedRateLimitingInterface: r.queue}
	r.queue = q
	return q
}

func (q *recordingQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.record(delayedAdd{key: key, delay: d})
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *recordingQueue) AddRateLimited(key cache.ObjectName) {
	q.record(delayedAdd{key: key, rateLimited: true})
	q.TypedRateLimitingInterface.AddRateLimited(key)
}

func (q *recordingQueue) record(a delayedAdd) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adds = append(q.adds, a)
}

// delayed returns the delayed adds recorded so far, in order.
func (q *recordingQueue) delayed() []delayedAdd {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]delayedAdd(nil), q.adds...)
}

// waitForLen returns r's queue length once it is want, or after 5 s of real time: the delaying queue moves a key
// whose fake-clock delay has passed on its own goroutine, so the length follows a Step shortly, not at once. The
// 5 s are a bound for a slow machine, not a measurement.
func waitForLen(r *Runner, want int) int {
	for deadline := time.Now().Add(5 * time.Second); r.Len() != want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return r.Len()
}

// Config validation helpers: each invalid field named once, in name order;
// nothing for valid ones.
func TestConfigFieldChecks(t *testing.T) {
	got := errors.Join(NonNegative(map[string]time.Duration{"Window": -time.Second, "Wait": 0, "After": -1})...)
	want := "After must not be negative, got -1ns\nWindow must not be negative, got -1s"
	if got == nil || got.Error() != want {
		t.Errorf("NonNegative: %v, want %q", got, want)
	}
	if errs := NonNegative(map[string]int{"Burst": 0, "Other": 5}); errs != nil {
		t.Errorf("NonNegative of valid counts: %v", errs)
	}
	got = errors.Join(RequiredFields(map[string]any{"Client": nil, "Recorder": 1, "Informer": nil})...)
	if want := "Client is required\nInformer is required"; got == nil || got.Error() != want {
		t.Errorf("RequiredFields: %v, want %q", got, want)
	}
}
