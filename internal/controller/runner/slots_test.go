package runner

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// TestSlotsBoundSyncsAcrossRunners: runners sharing Slots(2) never run more than two syncs at once, however
// many workers each has (sharded mode's one --concurrent-*-syncs per replica), and all their keys are synced.
func TestSlotsBoundSyncsAcrossRunners(t *testing.T) {
	slots := NewSlots(2)
	var running, peak, done atomic.Int32
	syncKey := func(context.Context, cache.ObjectName) (Result, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return Result{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for r := range 3 {
		run := New("test", syncKey, WithSlots(slots))
		for k := range 10 {
			run.Enqueue(cache.ObjectName{Namespace: string(rune('a' + r)), Name: string(rune('a' + k))})
		}
		wg.Go(func() { run.Run(ctx, 5) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for done.Load() < 30 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if done.Load() != 30 || peak.Load() > 2 || peak.Load() < 2 {
		t.Fatalf("synced %d of 30 keys, at most %d at once; want 30 and exactly 2", done.Load(), peak.Load())
	}
}

// TestSlotsSetLimit: a sharded replica's slots follow its share of the ring (SetLimit); raising the bound lets
// waiting syncs start at once, lowering it holds new syncs until fewer than the new bound run.
func TestSlotsSetLimit(t *testing.T) {
	s := NewSlots(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !s.acquire(ctx) {
		t.Fatal("the first slot was not taken")
	}
	got := make(chan bool, 2)
	for range 2 {
		go func() { got <- s.acquire(ctx) }()
	}
	select {
	case <-got:
		t.Fatal("a second sync started with a bound of 1")
	case <-time.After(50 * time.Millisecond):
	}
	s.SetLimit(3)
	for i := range 2 {
		select {
		case ok := <-got:
			if !ok {
				t.Fatalf("waiter %d gave up", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d still waits after the bound rose to 3", i)
		}
	}
	s.SetLimit(2) // 3 in flight
	s.release()   // 2 in flight: still not below 2
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if s.acquire(short) {
		t.Fatal("a sync started with 2 in flight and a bound of 2")
	}
	s.release() // 1 in flight
	if !s.acquire(ctx) {
		t.Fatal("no slot with 1 in flight and a bound of 2")
	}
	if s.Limit() != 2 {
		t.Fatalf("Limit() = %d, want 2", s.Limit())
	}
	s.SetLimit(0)
	if s.Limit() != 1 {
		t.Fatalf("SetLimit(0) gave %d, want 1 (never below one sync)", s.Limit())
	}
}
