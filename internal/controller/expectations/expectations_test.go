package expectations

import (
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

const rsKey = "ns/rs"

func newTestTracker(t *testing.T) (*Tracker, *clocktesting.FakeClock, klog.Logger, *[]string) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tr := NewTracker("replicaset", clk, 0)
	var expired []string
	tr.OnExpired = func(key string) { expired = append(expired, key) }
	logger, _ := ktesting.NewTestContext(t)
	return tr, clk, logger, &expired
}

func TestTracker(t *testing.T) {
	type step func(tr *Tracker, clk *clocktesting.FakeClock, logger klog.Logger)
	cases := []struct {
		name          string
		steps         []step
		wantSatisfied bool
		wantExpired   int
	}{
		{name: "RS-8 no record is satisfied", wantSatisfied: true},
		{
			name:  "RS-9 creations pending",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) { tr.ExpectCreations(l, rsKey, 2) }},
		},
		{
			name: "RS-9 creations observed",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 2)
				tr.CreationObserved(l, rsKey)
				tr.CreationObserved(l, rsKey)
			}},
			wantSatisfied: true,
		},
		{
			name: "RS-9 skipped creations lowered",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 7)
				tr.LowerExpectations(l, rsKey, 4, 0)
				tr.CreationObserved(l, rsKey)
				tr.CreationObserved(l, rsKey)
				tr.CreationObserved(l, rsKey)
			}},
			wantSatisfied: true,
		},
		{
			name: "RS-10 deletion of an unexpected pod does not count",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectDeletions(l, rsKey, []string{"ns/a"})
				tr.DeletionObserved(l, rsKey, "ns/other")
			}},
		},
		{
			name: "RS-10 one pod observed twice counts once",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectDeletions(l, rsKey, []string{"ns/a", "ns/b"})
				tr.DeletionObserved(l, rsKey, "ns/a")
				tr.DeletionObserved(l, rsKey, "ns/a")
			}},
		},
		{
			name: "RS-10 all expected deletions observed",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectDeletions(l, rsKey, []string{"ns/a", "ns/b"})
				tr.DeletionObserved(l, rsKey, "ns/b")
				tr.DeletionObserved(l, rsKey, "ns/a")
			}},
			wantSatisfied: true,
		},
		{
			name: "RS-8 setting replaces the previous record",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectDeletions(l, rsKey, []string{"ns/a"})
				tr.ExpectCreations(l, rsKey, 0)
			}},
			wantSatisfied: true,
		},
		{
			name: "RS-8 not yet expired at exactly the TTL",
			steps: []step{func(tr *Tracker, clk *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 1)
				clk.Step(DefaultTimeout)
			}},
		},
		{
			name: "RS-8 expired after the TTL, reported once",
			steps: []step{func(tr *Tracker, clk *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 1)
				clk.Step(DefaultTimeout + time.Second)
				tr.SatisfiedExpectations(l, rsKey)
			}},
			wantSatisfied: true,
			wantExpired:   1,
		},
		{
			name: "RS-8 lowering never refreshes the timestamp",
			steps: []step{func(tr *Tracker, clk *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 3)
				clk.Step(4 * time.Minute)
				tr.CreationObserved(l, rsKey)
				clk.Step(2 * time.Minute)
			}},
			wantSatisfied: true,
			wantExpired:   1,
		},
		{
			name: "RS-8 re-setting refreshes the timestamp",
			steps: []step{func(tr *Tracker, clk *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 3)
				clk.Step(4 * time.Minute)
				tr.ExpectCreations(l, rsKey, 3)
				clk.Step(2 * time.Minute)
			}},
		},
		{
			name: "RS-11 delete expectations",
			steps: []step{func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
				tr.ExpectCreations(l, rsKey, 3)
				tr.DeleteExpectations(l, rsKey)
			}},
			wantSatisfied: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, clk, logger, expired := newTestTracker(t)
			for _, s := range tc.steps {
				s(tr, clk, logger)
			}
			if got := tr.SatisfiedExpectations(logger, rsKey); got != tc.wantSatisfied {
				t.Errorf("SatisfiedExpectations = %v, want %v", got, tc.wantSatisfied)
			}
			if len(*expired) != tc.wantExpired {
				t.Errorf("OnExpired called %d times (%v), want %d", len(*expired), *expired, tc.wantExpired)
			}
		})
	}
}

func TestTrackerPendingAndOtherKeys(t *testing.T) {
	tr, _, logger, _ := newTestTracker(t)
	tr.ExpectCreations(logger, rsKey, 2)
	tr.CreationObserved(logger, "ns/other") // RS-9: no record for another key, no effect
	if add, del, ok := tr.Pending(rsKey); !ok || add != 2 || del != 0 {
		t.Fatalf("Pending = %d, %d, %v; want 2, 0, true", add, del, ok)
	}
	if _, _, ok := tr.Pending("ns/other"); ok {
		t.Fatal("observing an unknown key created a record")
	}
}
