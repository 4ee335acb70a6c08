package shard

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// countingRun is a Running whose counts are the same every time and which counts how often it is asked.
type countingRun struct{ pods, steady int }

func (r *countingRun) Stop()              {}
func (r *countingRun) HasSynced() bool    { return true }
func (r *countingRun) Pods() (int, int)   { r.pods++; return 30, 1 }
func (r *countingRun) Steady() (int, int) { r.steady++; return 30, 1 }

// TestRefreshWeightsCountsAtMostEveryInterval (SH-8, issue 45): the coordinator's rounds come every RetryPeriod
// and at each Lease renewal, and a counting walks every cached pod, so refreshWeights counts a bucket's pods at
// most once per maxCountInterval, and once per WeightRefreshInterval when that is shorter.
func TestRefreshWeightsCountsAtMostEveryInterval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		every    time.Duration
	}{
		{name: "default interval", interval: DefaultWeightRefreshInterval, every: maxCountInterval},
		{name: "shorter interval", interval: 2 * time.Second, every: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			c := NewCoordinator(Config{Identity: "a", Clock: clk, WeightRefreshInterval: tc.interval})
			run := &countingRun{}
			c.running[0] = &bucketRun{running: run}
			ring := Ring{Buckets: []Bucket{{Owner: "a", Pods: 30}}}
			for round := range 3 * int(tc.every/time.Second) {
				// The ring's counts hold, so no round writes (the nil ConfigMap is never read).
				if c.refreshWeights(context.Background(), nil, ring) {
					t.Fatalf("round %d: tried a write with the ring's counts holding", round)
				}
				clk.Step(time.Second)
			}
			if run.steady != 3 || run.pods != 3 {
				t.Errorf("over %v in 1 s rounds: counted steady pods %d times, cached pods %d times; want 3 each (every %v)",
					3*tc.every, run.steady, run.pods, tc.every)
			}
		})
	}
}
