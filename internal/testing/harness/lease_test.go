package harness

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// version is a Lease version held by holder ("" released), renewed and
// acquired at the given seconds after t0, with a 3s lease.
func version(holder string, transitions int32, acquired, renewed float64) coordinationv1.LeaseSpec {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) *metav1.MicroTime {
		m := metav1.NewMicroTime(t0.Add(time.Duration(s * float64(time.Second))))
		return &m
	}
	duration := int32(3)
	if holder == "" {
		duration = 1
	}
	return coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
		AcquireTime: at(acquired), RenewTime: at(renewed), LeaseTransitions: &transitions}
}

func TestTakeovers(t *testing.T) {
	a1, a2 := version("a", 0, 0, 0), version("a", 0, 0, 2)
	cases := []struct {
		name              string
		versions          []coordinationv1.LeaseSpec
		released, expired bool // whether ReleasedTakeover / ExpiredTakeover(…, "a", "b") accept them
	}{
		{name: "released", versions: []coordinationv1.LeaseSpec{a1, a2, version("", 0, 2.1, 2.1), version("b", 1, 2.5, 2.5)}, released: true},
		{name: "expired", versions: []coordinationv1.LeaseSpec{a1, a2, version("b", 1, 5.2, 5.2)}, expired: true},
		{name: "stolen before expiry", versions: []coordinationv1.LeaseSpec{a1, a2, version("b", 1, 4.9, 4.9)}},
		// Wall-clock stamps may be a few ms short of the lease after a clock
		// adjustment (seen in CI: 3.4 ms); 60 ms short is refused: a standby that did not wait.
		{name: "expired, wall clock adjusted", versions: []coordinationv1.LeaseSpec{a1, a2, version("b", 1, 4.9966, 4.9966)}, expired: true},
		{name: "stolen 60ms before expiry", versions: []coordinationv1.LeaseSpec{a1, a2, version("b", 1, 4.94, 4.94)}},
		{name: "transitions not counted", versions: []coordinationv1.LeaseSpec{a1, version("", 0, 2, 2), version("b", 0, 2.5, 2.5)}},
		{name: "from someone else", versions: []coordinationv1.LeaseSpec{version("c", 0, 0, 2), version("b", 1, 5.5, 5.5)}},
		{name: "released by someone else", versions: []coordinationv1.LeaseSpec{a1, version("c", 1, 5, 5), version("", 1, 6, 6), version("b", 2, 6.5, 6.5)}},
		{name: "never taken over", versions: []coordinationv1.LeaseSpec{a1, a2}},
		{name: "held from the start", versions: []coordinationv1.LeaseSpec{version("b", 1, 0, 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := ReleasedTakeover(tc.versions, "a", "b"); (err == nil) != tc.released {
				t.Errorf("ReleasedTakeover = %v, want accepted %t", err, tc.released)
			}
			if err := ExpiredTakeover(tc.versions, "a", "b"); (err == nil) != tc.expired {
				t.Errorf("ExpiredTakeover = %v, want accepted %t", err, tc.expired)
			}
		})
	}
}
