package shard

import "testing"

// TestLopsided: a re-split is asked only for a bucket over twice its share by minResplitExcess pods or more,
// with more than one namespace (one namespace is never split, SH-5).
func TestLopsided(t *testing.T) {
	ring := func(pods ...int) Ring {
		r := NewRing(Bounds(nil, len(pods)), nil)
		for i, p := range pods {
			r.Buckets[i].Pods, r.Buckets[i].Namespaces = p, 3
		}
		return r
	}
	for _, tc := range []struct {
		name string
		ring Ring
		want bool
	}{
		{"even", ring(100, 100, 100, 100), false},
		{"small cluster, lopsided share", ring(12, 0, 0, 0), false},
		{"big excess", ring(1000, 100, 100, 100), true},
		{"under twice", ring(300, 200, 200, 200), false},
		{"one namespace", func() Ring { r := ring(1000, 100, 100, 100); r.Buckets[0].Namespaces = 1; return r }(), false},
	} {
		if got := lopsided(tc.ring); got != tc.want {
			t.Errorf("%s: lopsided = %v, want %v", tc.name, got, tc.want)
		}
	}
}
