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
