package expectations

import (
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestConsistencyTracker covers the IM-4 read-your-writes guard (RS-1).
func TestConsistencyTracker(t *testing.T) {
	type write struct{ resource, rv string }
	cases := []struct {
		name         string
		writes       []write
		podsObserved string
		rsObserved   string
		elapsed      time.Duration
		wantCaughtUp bool
		wantGiveUps  int
		wantRecord   bool // record kept after the check
	}{
		{name: "no writes", wantCaughtUp: true},
		{name: "pod write observed", writes: []write{{"pods", "100"}}, podsObserved: "100", wantCaughtUp: true},
		{name: "pod write newer than cache", writes: []write{{"pods", "100"}}, podsObserved: "99", wantRecord: true},
		{name: "RV compared numerically, not lexically", writes: []write{{"pods", "1000"}}, podsObserved: "999", wantRecord: true},
		{name: "longer observed RV is newer", writes: []write{{"pods", "999"}}, podsObserved: "1000", wantCaughtUp: true},
		{name: "highest write wins", writes: []write{{"pods", "120"}, {"pods", "110"}}, podsObserved: "115", wantRecord: true},
		{
			name:   "each resource checked against its own informer",
			writes: []write{{"pods", "100"}, {"replicasets", "105"}}, podsObserved: "200", rsObserved: "104",
			wantRecord: true,
		},
		{
			name:   "both informers caught up",
			writes: []write{{"pods", "100"}, {"replicasets", "105"}}, podsObserved: "101", rsObserved: "105",
			wantCaughtUp: true,
		},
		{name: "unknown observed RV never blocks", writes: []write{{"pods", "100"}}, podsObserved: "", wantCaughtUp: true},
		{name: "non-integer RV never blocks", writes: []write{{"pods", "abc"}}, podsObserved: "5", wantCaughtUp: true},
		{name: "empty written RV ignored", writes: []write{{"pods", ""}}, podsObserved: "5", wantCaughtUp: true},
		{name: "resource without source never blocks", writes: []write{{"nodes", "100"}}, wantCaughtUp: true},
		{
			name:   "wait within the cap",
			writes: []write{{"pods", "100"}}, podsObserved: "99", elapsed: DefaultMaxConsistencyWait,
			wantRecord: true,
		},
		{
			name:   "wait past the cap gives up once",
			writes: []write{{"pods", "100"}}, podsObserved: "99", elapsed: DefaultMaxConsistencyWait + time.Second,
			wantCaughtUp: true, wantGiveUps: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			tr := NewConsistencyTracker("replicaset", clk, map[string]ObservedFunc{
				"pods":        func() string { return tc.podsObserved },
				"replicasets": func() string { return tc.rsObserved },
			})
			var giveUps int
			tr.OnGiveUp = func(string) { giveUps++ }
			for _, w := range tc.writes {
				tr.RecordWrite(rsKey, w.resource, w.rv)
			}
			clk.Step(tc.elapsed)
			if got := tr.CaughtUp(logger, rsKey); got != tc.wantCaughtUp {
				t.Errorf("CaughtUp = %v, want %v", got, tc.wantCaughtUp)
			}
			if got := tr.Waiting(rsKey); got != tc.wantRecord {
				t.Errorf("Waiting after check = %v, want %v", got, tc.wantRecord)
			}
			if giveUps != tc.wantGiveUps {
				t.Errorf("OnGiveUp called %d times, want %d", giveUps, tc.wantGiveUps)
			}
			if tr.CaughtUp(logger, "ns/other") != true {
				t.Error("a key without writes must never wait")
			}
		})
	}
}

func TestConsistencyTrackerForgetAndCatchUp(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	observed := "10"
	tr := NewConsistencyTracker("replicaset", clocktesting.NewFakeClock(time.Now()),
		map[string]ObservedFunc{"pods": func() string { return observed }})
	tr.RecordWrite(rsKey, "pods", "20")
	if tr.CaughtUp(logger, rsKey) {
		t.Fatal("caught up before the informer observed RV 20")
	}
	observed = "21"
	if !tr.CaughtUp(logger, rsKey) || tr.Waiting(rsKey) {
		t.Fatal("record must be cleared once caught up")
	}
	tr.RecordWrite(rsKey, "pods", "30")
	tr.Forget(rsKey) // RS-2 / EH-9: ReplicaSet deleted
	if !tr.CaughtUp(logger, rsKey) {
		t.Fatal("Forget must clear the record")
	}
}
