package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// openWatch opens a raw pod watch in ns through base and streams the index
// of each event it receives; the channel closes when the stream ends.
func openWatch(ctx context.Context, t *testing.T, base, ns string) <-chan int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/"+ns+"/pods?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("watch: got status %d, want 200", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan int, 100)
	go func() {
		defer close(ch)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string
				Object corev1.Pod
			}
			if dec.Decode(&ev) != nil {
				return
			}
			ch <- podIndex(ev.Object.Name)
		}
	}()
	return ch
}

// receive returns the next value of ch, failing the test if ch closes or
// nothing arrives within eventually.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("watch stream ended, want an event")
		}
		return v
	case <-time.After(eventually):
		t.Fatalf("no watch event within %v", eventually)
	}
	var zero T
	return zero
}

// nothingYet fails the test if ch holds an event or has closed.
func nothingYet[T any](t *testing.T, ch <-chan T, when string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("watch stream ended %s, want it open", when)
		}
		t.Fatalf("got event %v %s, want none yet", v, when)
	default:
	}
}

// ended waits for ch to close, failing the test if it does not in time.
func ended[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	deadline := time.After(eventually)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch stream did not end")
		}
	}
}

// queuedEvents returns how many whole watch events the proxy's open streams
// hold in their queues, not counting the one a Read is waiting to hand out.
func queuedEvents(p *Proxy) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for s := range p.streams {
		s.mu.Lock()
		for _, c := range s.queue {
			n += bytes.Count(c.data, []byte("\n")) // the API server ends each event with a newline
		}
		s.mu.Unlock()
	}
	return n
}

// TestWatchDelay checks that events reaching the proxy gap apart are each
// held back until the proxy's clock passes their arrival plus the delay, and
// keep their order.
func TestWatchDelay(t *testing.T) {
	const delay, gap = 300 * time.Millisecond, 50 * time.Millisecond
	rule := Rule{Resource: "pods", Verb: "watch", WatchDelay: delay}
	cases := []struct {
		name        string
		setBeforeOp bool
	}{
		{"rule set before the stream opens", true},
		{"rule set on an open stream", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, p, clk := setupFakeClock(t)
			if tc.setBeforeOp {
				p.SetRules(rule)
			}
			ch := openWatch(context.Background(), t, p.URL(), "ns")
			if !tc.setBeforeOp {
				f.send(0)
				if i := receive(t, ch); i != 0 { // undelayed: the clock need not move
					t.Fatalf("got event %d, want 0", i)
				}
				p.SetRules(rule)
			}
			// Event i reaches the proxy at t0+(i-1)*gap, so it is due at
			// t0+(i-1)*gap+delay.
			f.send(1)
			waitForTimers(t, clk, 1, "the stream to hold back event 1")
			for i := 2; i <= 3; i++ {
				clk.Step(gap)
				f.send(i)
				poll(t, fmt.Sprintf("event %d to reach the proxy", i), func() bool { return queuedEvents(p) == i-1 })
			}
			for i := 1; i <= 3; i++ {
				due := t0.Add(time.Duration(i-1)*gap + delay)
				waitForTimers(t, clk, 1, fmt.Sprintf("the stream to hold back event %d", i))
				clk.SetTime(due.Add(-time.Millisecond))
				if !clk.HasWaiters() {
					t.Fatalf("event %d released by %v, want at %v", i, clk.Now().Sub(t0), due.Sub(t0))
				}
				nothingYet(t, ch, fmt.Sprintf("at %v", clk.Now().Sub(t0)))
				clk.SetTime(due)
				if got := receive(t, ch); got != i {
					t.Fatalf("got event %d, want %d (order must be kept)", got, i)
				}
			}
		})
	}
}

// TestWatchDelayRemoved checks that removing a delay releases no event held
// back under it before it is due, holds later events behind them, and stops
// delaying new ones.
func TestWatchDelayRemoved(t *testing.T) {
	const delay, gap = 2 * time.Second, 100 * time.Millisecond
	f, p, clk := setupFakeClock(t)
	p.SetRules(Rule{Resource: "pods", WatchDelay: delay})
	ch := openWatch(context.Background(), t, p.URL(), "ns")
	f.send(0) // due at t0+delay
	waitForTimers(t, clk, 1, "the stream to hold back event 0")
	clk.Step(gap)
	f.send(1) // due at t0+gap+delay
	poll(t, "event 1 to reach the proxy", func() bool { return queuedEvents(p) == 1 })
	p.SetRules()
	f.send(2) // no delay of its own, but queued behind 0 and 1
	poll(t, "event 2 to reach the proxy", func() bool { return queuedEvents(p) == 2 })
	nothingYet(t, ch, "before event 0 is due")

	clk.SetTime(t0.Add(delay))
	if i := receive(t, ch); i != 0 {
		t.Fatalf("got event %d, want 0", i)
	}
	due1 := t0.Add(gap + delay)
	waitForTimers(t, clk, 1, "the stream to hold back event 1")
	clk.SetTime(due1.Add(-time.Millisecond))
	if !clk.HasWaiters() {
		t.Fatalf("event 1 released by %v, want at %v (delayed before the rule was removed)", clk.Now().Sub(t0), due1.Sub(t0))
	}
	nothingYet(t, ch, "before event 1 is due")
	clk.SetTime(due1)
	for want := 1; want <= 2; want++ { // event 2 is due with event 1
		if i := receive(t, ch); i != want {
			t.Fatalf("got event %d, want %d (order must be kept)", i, want)
		}
	}

	f.send(3) // the clock stays put: event 3 must not wait on it
	if i := receive(t, ch); i != 3 {
		t.Errorf("got event %d, want 3", i)
	}
}

// dropCase is one case of TestDropWatches: what is done to the proxy around
// a pods watch, and when the stream must then end.
type dropCase struct {
	name string
	// before runs before the watch opens (at t0), after once it has delivered one event.
	before, after func(t *testing.T, p *Proxy, clk *clocktesting.FakeClock)
	// openFor is how long after t0 the stream must end; 0 means at once,
	// without the clock moving.
	openFor time.Duration
}

// dropWatchCases are TestDropWatches' cases.
func dropWatchCases() []dropCase {
	return []dropCase{
		{
			name: "DropWatches of the resource",
			after: func(t *testing.T, p *Proxy, _ *clocktesting.FakeClock) {
				if n := p.DropWatches("replicasets"); n != 0 {
					t.Errorf("DropWatches(replicasets) = %d, want 0", n)
				}
				if n := p.DropWatches("pods"); n != 1 {
					t.Errorf("DropWatches(pods) = %d, want 1", n)
				}
			},
		},
		{
			name: "DropWatches of all",
			after: func(t *testing.T, p *Proxy, _ *clocktesting.FakeClock) {
				if n := p.DropWatches(""); n != 1 {
					t.Errorf(`DropWatches("") = %d, want 1`, n)
				}
			},
		},
		{
			name: "DropWatchAfter set before the stream opens",
			before: func(_ *testing.T, p *Proxy, _ *clocktesting.FakeClock) {
				p.SetRules(Rule{Resource: "pods", DropWatchAfter: 300 * time.Millisecond})
			},
			openFor: 300 * time.Millisecond,
		},
		{
			name: "DropWatchAfter set on a younger stream counts from its opening",
			after: func(_ *testing.T, p *Proxy, clk *clocktesting.FakeClock) {
				clk.Step(100 * time.Millisecond)
				p.SetRules(Rule{Verb: "watch", DropWatchAfter: 300 * time.Millisecond})
			},
			openFor: 300 * time.Millisecond,
		},
		{
			name: "DropWatchAfter set on a stream open longer than that",
			after: func(_ *testing.T, p *Proxy, clk *clocktesting.FakeClock) {
				clk.Step(time.Minute)
				p.SetRules(Rule{Verb: "watch", DropWatchAfter: time.Second})
			},
		},
	}
}

// TestDropWatches checks that DropWatches ends streams at once and that
// DropWatchAfter ends them once the proxy's clock passes their opening plus
// DropWatchAfter, and not before.
func TestDropWatches(t *testing.T) {
	cases := dropWatchCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, p, clk := setupFakeClock(t)
			if tc.before != nil {
				tc.before(t, p, clk)
			}
			w, err := clientset(t, p).CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			f.send(0)
			if ev := receive(t, w.ResultChan()); ev.Type != "ADDED" {
				t.Fatalf("first event %+v, want ADDED", ev)
			}
			if tc.after != nil {
				tc.after(t, p, clk)
			}
			if tc.openFor > 0 {
				waitForTimers(t, clk, 1, "the DropWatchAfter deadline")
				clk.SetTime(t0.Add(tc.openFor - time.Millisecond))
				if !clk.HasWaiters() || p.Stats().WatchesDropped != 0 {
					t.Fatalf("stream dropped by %v after it opened, want at %v", clk.Now().Sub(t0), tc.openFor)
				}
				nothingYet(t, w.ResultChan(), fmt.Sprintf("%v after it opened", clk.Now().Sub(t0)))
				clk.SetTime(t0.Add(tc.openFor))
			}
			ended(t, w.ResultChan())
			poll(t, "no open watches", func() bool { return p.Stats().OpenWatches == 0 && f.openWatches.Load() == 0 })
			if st := p.Stats(); st.WatchesDropped != 1 || st.WatchesOpened != 1 {
				t.Errorf("Stats = %+v, want 1 watch opened and dropped", st)
			}
		})
	}
}

func TestStopClosesEverything(t *testing.T) {
	cases := []struct {
		name  string
		http2 bool
		// stop ends the proxy: Stop, or cancelling the context it was started with.
		viaContext bool
	}{
		{"Stop, HTTP/1.1 upstream", false, false},
		{"Stop, HTTP/2 upstream", true, false},
		{"context cancelled, HTTP/2 upstream", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			f := newFakeAPIServer(t, tc.http2)
			p, err := Start(ctx, f.config(), Options{})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(p.Stop)
			p.SetRules(Rule{Resource: "pods", WatchDelay: time.Hour}) // one stream holds a chunk back
			raw1 := openWatch(context.Background(), t, p.URL(), "ns")
			raw2 := openWatch(context.Background(), t, p.URL(), "other")
			w, err := clientset(t, p).CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			f.send(0)
			poll(t, "3 open watches", func() bool { return p.Stats().OpenWatches == 3 && f.openWatches.Load() == 3 })

			if tc.viaContext {
				cancel()
			} else {
				p.Stop()
			}
			ended(t, raw1)
			ended(t, raw2)
			ended(t, w.ResultChan())
			poll(t, "no open watches", func() bool { return p.Stats().OpenWatches == 0 && f.openWatches.Load() == 0 })
			poll(t, "the listener to close", func() bool {
				resp, err := http.Get(p.URL() + "/version")
				if err == nil {
					resp.Body.Close()
				}
				return err != nil
			})
			p.Stop() // idempotent
		})
	}
}

func TestClientDisconnect(t *testing.T) {
	f, p := setup(t, Options{})
	p.SetRules(Rule{Resource: "pods", Namespace: "delayed", WatchDelay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	streams := []<-chan int{
		openWatch(ctx, t, p.URL(), "ns"),
		openWatch(ctx, t, p.URL(), "delayed"),
		openWatch(ctx, t, p.URL(), "other"),
	}
	f.send(0)
	f.send(1)
	poll(t, "3 open watches", func() bool { return p.Stats().OpenWatches == 3 })
	cancel()
	for _, ch := range streams {
		ended(t, ch)
	}
	poll(t, "no open watches, here and upstream", func() bool {
		return p.Stats().OpenWatches == 0 && f.openWatches.Load() == 0
	})
}
