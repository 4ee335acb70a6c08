package replicaset

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSlowStartBatchSizes covers RS-13's 1, 2, 4, ... batches.
func TestSlowStartBatchSizes(t *testing.T) {
	cases := []struct {
		count int
		want  []int
	}{
		{0, nil},
		{1, []int{1}},
		{3, []int{1, 2}},
		{7, []int{1, 2, 4}},
		{10, []int{1, 2, 4, 3}},
		{500, []int{1, 2, 4, 8, 16, 32, 64, 128, 245}},
	}
	for _, tc := range cases {
		if got := slowStartBatchSizes(tc.count, slowStartInitialBatchSize); !slices.Equal(got, tc.want) {
			t.Errorf("slowStartBatchSizes(%d) = %v, want %v", tc.count, got, tc.want)
		}
	}
}

// TestSlowStartBatch covers RS-13: stop after a batch with a failure, return
// the successes and the first error; the caller lowers the skipped count.
func TestSlowStartBatch(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name          string
		count         int
		failCalls     []int32 // 1-based call numbers that fail
		wantSuccesses int
		wantCalls     int32
		wantErr       bool
	}{
		{name: "all succeed", count: 10, wantSuccesses: 10, wantCalls: 10},
		{name: "first call fails stops at batch 1", count: 10, failCalls: []int32{1}, wantSuccesses: 0, wantCalls: 1, wantErr: true},
		// Batch 2 is calls 2 and 3; one of them fails, batch 3 never runs: 7 skipped.
		{name: "failure in batch 2", count: 10, failCalls: []int32{2}, wantSuccesses: 2, wantCalls: 3, wantErr: true},
		{name: "failure in last batch", count: 7, failCalls: []int32{7}, wantSuccesses: 6, wantCalls: 7, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			got, err := slowStartBatch(make(chan struct{}, maxPodWritesInFlight), tc.count, slowStartInitialBatchSize, func() error {
				if slices.Contains(tc.failCalls, calls.Add(1)) {
					return boom
				}
				return nil
			})
			if got != tc.wantSuccesses || calls.Load() != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Errorf("successes=%d calls=%d err=%v; want %d, %d, err=%v", got, calls.Load(), err, tc.wantSuccesses, tc.wantCalls, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, boom) {
				t.Errorf("err = %v, want boom", err)
			}
			if skipped := tc.count - got; skipped != tc.count-tc.wantSuccesses {
				t.Errorf("skipped = %d", skipped)
			}
		})
	}
}

// TestReplicaDiff covers RS-12's burst clamp.
func TestReplicaDiff(t *testing.T) {
	cases := []struct{ active, desired, burst, want int }{
		{0, 3, 500, -3}, {5, 3, 500, 2}, {0, 1000, 500, -500}, {1000, 0, 500, 500}, {3, 3, 500, 0},
	}
	for _, tc := range cases {
		if got := replicaDiff(tc.active, tc.desired, tc.burst); got != tc.want {
			t.Errorf("replicaDiff(%d, %d, %d) = %d, want %d", tc.active, tc.desired, tc.burst, got, tc.want)
		}
	}
}

// TestConcurrentlyBoundsPodWritesInFlight: bursts of pod writes (RS-13's batches, RS-14's victims) from two
// workers run concurrently but never more than the shared token channel's capacity at once, and every call is
// made exactly once.
func TestConcurrentlyBoundsPodWritesInFlight(t *testing.T) {
	const n = 3*maxPodWritesInFlight + 7
	inFlight := make(chan struct{}, maxPodWritesInFlight)
	var running, peak atomic.Int32
	calls := make([][n]atomic.Int32, 2)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for w := range calls { // two workers bursting at once
		wg.Go(func() {
			concurrently(inFlight, n, func(i int) {
				now := running.Add(1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				<-release
				calls[w][i].Add(1)
				running.Add(-1)
			})
		})
	}
	for running.Load() < maxPodWritesInFlight { // the first maxPodWritesInFlight block together
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != maxPodWritesInFlight {
		t.Errorf("peak in flight = %d, want %d (concurrent, and bounded across workers)", p, maxPodWritesInFlight)
	}
	for w := range calls {
		for i := range calls[w] {
			if c := calls[w][i].Load(); c != 1 {
				t.Errorf("worker %d: fn(%d) called %d times, want once", w, i, c)
			}
		}
	}
}
