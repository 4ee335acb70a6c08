package faultproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// arrival is one watch event as the client received it.
type arrival struct {
	index int
	at    time.Time
}

// openWatch opens a raw pod watch in ns through base and streams the events
// it receives; the channel closes when the stream ends.
func openWatch(ctx context.Context, t *testing.T, base, ns string) <-chan arrival {
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
	ch := make(chan arrival, 100)
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
			ch <- arrival{index: podIndex(ev.Object.Name), at: time.Now()}
		}
	}()
	return ch
}

// receive returns the next arrival, failing the test if the stream ends or
// nothing arrives in time.
func receive(t *testing.T, ch <-chan arrival) arrival {
	t.Helper()
	select {
	case a, ok := <-ch:
		if !ok {
			t.Fatal("watch stream ended, want an event")
		}
		return a
	case <-time.After(eventually + 5*time.Second):
		t.Fatal("no watch event in time")
	}
	return arrival{}
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

func TestWatchDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
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
			f, p := setup(t, Options{})
			if tc.setBeforeOp {
				p.SetRules(rule)
			}
			ch := openWatch(context.Background(), t, p.URL(), "ns")
			if !tc.setBeforeOp {
				f.send(0)
				if a := receive(t, ch); a.index != 0 {
					t.Fatalf("got event %d, want 0", a.index)
				}
				p.SetRules(rule)
			}
			for i := 1; i <= 3; i++ {
				f.send(i)
				time.Sleep(50 * time.Millisecond)
			}
			for i := 1; i <= 3; i++ {
				a := receive(t, ch)
				if a.index != i {
					t.Fatalf("got event %d, want %d (order must be kept)", a.index, i)
				}
				lag := a.at.Sub(f.sentAt(i))
				if lag < delay || lag > delay+eventually {
					t.Errorf("event %d arrived %v after it was sent, want between %v and %v", i, lag, delay, delay+eventually)
				}
			}
		})
	}
}

func TestWatchDelayRemoved(t *testing.T) {
	const delay = 2 * time.Second
	f, p := setup(t, Options{})
	p.SetRules(Rule{Resource: "pods", WatchDelay: delay})
	ch := openWatch(context.Background(), t, p.URL(), "ns")
	f.send(0)
	f.send(1)
	time.Sleep(200 * time.Millisecond) // both are held back now
	p.SetRules()
	f.send(2) // no delay of its own, but queued behind 0 and 1

	var got []arrival
	for range 3 {
		got = append(got, receive(t, ch))
	}
	for i, a := range got {
		if a.index != i {
			t.Fatalf("got events %v, want 0, 1, 2 in order", got)
		}
	}
	if lag := got[1].at.Sub(f.sentAt(1)); lag < delay {
		t.Errorf("event 1 arrived %v after it was sent, want at least %v (delayed before the rule was removed)", lag, delay)
	}
	if got[2].at.Before(f.sentAt(1).Add(delay)) {
		t.Errorf("event 2 arrived before event 1 was due")
	}

	f.send(3)
	a := receive(t, ch)
	if lag := a.at.Sub(f.sentAt(3)); a.index != 3 || lag >= delay {
		t.Errorf("event %d arrived %v after it was sent, want event 3 in less than the removed delay %v", a.index, lag, delay)
	}
}

func TestDropWatches(t *testing.T) {
	cases := []struct {
		name string
		// before runs before the watch opens, after once it has delivered one event.
		before, after func(t *testing.T, p *Proxy)
		minOpen       time.Duration
	}{
		{
			name: "DropWatches of the resource",
			after: func(t *testing.T, p *Proxy) {
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
			after: func(t *testing.T, p *Proxy) {
				if n := p.DropWatches(""); n != 1 {
					t.Errorf(`DropWatches("") = %d, want 1`, n)
				}
			},
		},
		{
			name: "DropWatchAfter set before the stream opens",
			before: func(_ *testing.T, p *Proxy) {
				p.SetRules(Rule{Resource: "pods", DropWatchAfter: 300 * time.Millisecond})
			},
			minOpen: 300 * time.Millisecond,
		},
		{
			name:  "DropWatchAfter set on a stream open longer than that",
			after: func(_ *testing.T, p *Proxy) { p.SetRules(Rule{Verb: "watch", DropWatchAfter: time.Nanosecond}) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, p := setup(t, Options{})
			if tc.before != nil {
				tc.before(t, p)
			}
			opened := time.Now()
			w, err := clientset(t, p).CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			f.send(0)
			if ev := <-w.ResultChan(); ev.Type != "ADDED" {
				t.Fatalf("first event %+v, want ADDED", ev)
			}
			if tc.after != nil {
				tc.after(t, p)
			}
			ended(t, w.ResultChan())
			if open := time.Since(opened); open < tc.minOpen {
				t.Errorf("stream ended after %v, want at least %v", open, tc.minOpen)
			}
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
	streams := []<-chan arrival{
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
