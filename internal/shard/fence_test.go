package shard

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// A claim's fence gives the instant it ends (issue 45: a write carries it as its deadline): the membership's
// validity (the last renewal's start + RenewDeadline), pushed on by each renewal within the epoch, cut short by
// the mode's hold (Config.Hold, SH-10), and the zero time for good once a new epoch began; a revoked fence has
// none.
func TestFenceDeadlineFollowsTheClaim(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	hold := time.Unix(1000, 0).Add(time.Hour)
	c := NewCoordinator(Config{Client: fake.NewClientset(), Namespace: "kube-system", Identity: "me", Durations: testDurations,
		Clock: clk, Hold: func() time.Time { return hold }})
	mustRenew(t, c.member)
	fence := NewFenceUntil(func() time.Time { return c.claimValidUntil(1) }, c.now)
	if d, ok := fence.Deadline(); !ok || !d.Equal(time.Unix(1010, 0)) || !fence.Valid() {
		t.Fatalf("after a renewal at 1000: deadline %v (%v), valid %v; want 1010", d, ok, fence.Valid())
	}
	clk.Step(5 * time.Second)
	mustRenew(t, c.member)
	if d, _ := fence.Deadline(); !d.Equal(time.Unix(1015, 0)) {
		t.Errorf("after a renewal at 1005: deadline %v, want 1015", d)
	}
	hold = time.Unix(1012, 0)
	if d, _ := fence.Deadline(); !d.Equal(hold) {
		t.Errorf("with the mode held until 1012: deadline %v", d)
	}
	clk.Step(7 * time.Second) // 1012: the hold ended, the membership has not
	if fence.Valid() {
		t.Errorf("valid past the mode's hold")
	}
	hold = time.Unix(1000, 0).Add(time.Hour)
	clk.Step(20 * time.Second) // the membership lapsed: a renewal now starts epoch 2
	mustRenew(t, c.member)
	if d, _ := fence.Deadline(); !d.IsZero() || fence.Valid() {
		t.Errorf("epoch 1's fence after epoch 2 began: deadline %v, valid %v", d, fence.Valid())
	}
	fence.Revoke()
	if _, ok := fence.Deadline(); ok {
		t.Errorf("a revoked fence has a deadline")
	}
	if _, ok := NewFence(func() bool { return true }).Deadline(); ok {
		t.Errorf("a NewFence fence has a deadline")
	}
}
