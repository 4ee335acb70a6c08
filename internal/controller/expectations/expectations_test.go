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

// A step is one call on the Tracker under test, for rsKey.
type step func(tr *Tracker, clk *clocktesting.FakeClock, l klog.Logger)

func expectCreations(n int) step {
	return func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) { tr.ExpectCreations(l, rsKey, n) }
}

func expectDeletions(podKeys ...string) step {
	return func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) { tr.ExpectDeletions(l, rsKey, podKeys) }
}

func creationObserved(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
	tr.CreationObserved(l, rsKey)
}

func deletionObserved(podKey string) step {
	return func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) { tr.DeletionObserved(l, rsKey, podKey) }
}

func lowerExpectations(add, del int) step {
	return func(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) { tr.LowerExpectations(l, rsKey, add, del) }
}

func satisfiedExpectations(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
	tr.SatisfiedExpectations(l, rsKey)
}

func deleteExpectations(tr *Tracker, _ *clocktesting.FakeClock, l klog.Logger) {
	tr.DeleteExpectations(l, rsKey)
}

func wait(d time.Duration) step {
	return func(_ *Tracker, clk *clocktesting.FakeClock, _ klog.Logger) { clk.Step(d) }
}

// trackerCase is a sequence of calls on a fresh Tracker and what it then
// reports for rsKey.
type trackerCase struct {
	name          string
	steps         []step
	wantSatisfied bool
	wantExpired   int
}

// trackerCountCases are TestTracker's cases about counting creations and
// deletions (RS-8, RS-9, RS-10).
func trackerCountCases() []trackerCase {
	return []trackerCase{
		{name: "RS-8 no record is satisfied", wantSatisfied: true},
		{name: "RS-9 creations pending", steps: []step{expectCreations(2)}},
		{
			name:          "RS-9 creations observed",
			steps:         []step{expectCreations(2), creationObserved, creationObserved},
			wantSatisfied: true,
		},
		{
			name:          "RS-9 skipped creations lowered",
			steps:         []step{expectCreations(7), lowerExpectations(4, 0), creationObserved, creationObserved, creationObserved},
			wantSatisfied: true,
		},
		{
			name:  "RS-10 deletion of an unexpected pod does not count",
			steps: []step{expectDeletions("ns/a"), deletionObserved("ns/other")},
		},
		{
			name:  "RS-10 one pod observed twice counts once",
			steps: []step{expectDeletions("ns/a", "ns/b"), deletionObserved("ns/a"), deletionObserved("ns/a")},
		},
		{
			name:          "RS-10 all expected deletions observed",
			steps:         []step{expectDeletions("ns/a", "ns/b"), deletionObserved("ns/b"), deletionObserved("ns/a")},
			wantSatisfied: true,
		},
		{
			name:          "RS-8 setting replaces the previous record",
			steps:         []step{expectDeletions("ns/a"), expectCreations(0)},
			wantSatisfied: true,
		},
	}
}

// trackerTTLCases are TestTracker's cases about the record's timeout (RS-8)
// and its deletion (RS-11).
func trackerTTLCases() []trackerCase {
	return []trackerCase{
		{
			name:  "RS-8 not yet expired at exactly the TTL",
			steps: []step{expectCreations(1), wait(DefaultTimeout)},
		},
		{
			name:          "RS-8 expired after the TTL, reported once",
			steps:         []step{expectCreations(1), wait(DefaultTimeout + time.Second), satisfiedExpectations},
			wantSatisfied: true,
			wantExpired:   1,
		},
		{
			name:          "RS-8 lowering never refreshes the timestamp",
			steps:         []step{expectCreations(3), wait(4 * time.Minute), creationObserved, wait(2 * time.Minute)},
			wantSatisfied: true,
			wantExpired:   1,
		},
		{
			name:  "RS-8 re-setting refreshes the timestamp",
			steps: []step{expectCreations(3), wait(4 * time.Minute), expectCreations(3), wait(2 * time.Minute)},
		},
		{
			name:          "RS-11 delete expectations",
			steps:         []step{expectCreations(3), deleteExpectations},
			wantSatisfied: true,
		},
	}
}

// TestTracker covers RS-8 to RS-11: each case's calls on a fresh Tracker,
// then whether it is satisfied and how often OnExpired was called.
func TestTracker(t *testing.T) {
	cases := append(trackerCountCases(), trackerTTLCases()...)
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

// TestTrackerPendingCreations: the creations in flight that EX-3's footprint counts: issued ones until
// observed or lowered, none without a record, none once the record is older than the TTL.
func TestTrackerPendingCreations(t *testing.T) {
	tr, clk, logger, _ := newTestTracker(t)
	if got := tr.PendingCreations(rsKey); got != 0 {
		t.Fatalf("no record: PendingCreations = %d, want 0", got)
	}
	tr.ExpectCreations(logger, rsKey, 3)
	tr.CreationObserved(logger, rsKey)
	if got := tr.PendingCreations(rsKey); got != 2 {
		t.Fatalf("3 expected, 1 observed: PendingCreations = %d, want 2", got)
	}
	tr.LowerExpectations(logger, rsKey, 2, 0)
	if got := tr.PendingCreations(rsKey); got != 0 {
		t.Fatalf("the rest lowered (failed creates): PendingCreations = %d, want 0", got)
	}
	tr.ExpectCreations(logger, rsKey, 4)
	clk.Step(DefaultTimeout + time.Second)
	if got := tr.PendingCreations(rsKey); got != 0 {
		t.Fatalf("record older than the TTL: PendingCreations = %d, want 0", got)
	}
}
