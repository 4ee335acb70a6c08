package timeline

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

// formatSeconds returns x the way test vectors write it: "1", "11.5".
func formatSeconds(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func TestSeriesOf(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	rs := func(name, rev string, replicas, available int32) ReplicaSet {
		return ReplicaSet{Name: name, Revision: rev, Replicas: replicas, Ready: available, Available: available}
	}
	r := &Recording{
		Replicas: 3, MaxTotal: 4, MinAvailable: 2, Start: start,
		Samples: []Sample{
			{Time: at(0), ReplicaSets: []ReplicaSet{rs("d-9", "9", 3, 3), rs("d-empty", "8", 0, 0)}, Available: 3, Total: 3},
			{Time: at(10), ReplicaSets: []ReplicaSet{rs("d-9", "9", 2, 2), rs("d-10", "10", 2, 0), rs("d-empty", "8", 0, 0)}, Available: 2, Total: 4},
			{Time: at(20), ReplicaSets: []ReplicaSet{rs("d-10", "10", 3, 3)}, Available: 3, Total: 3},
		},
	}
	s := seriesOf(r)

	var names []string
	for _, l := range s.replicaSets {
		names = append(names, l.name)
	}
	if want := []string{"d-9", "d-10"}; !slices.Equal(names, want) {
		t.Errorf("ReplicaSets %v, want %v: by revision as a number, without the one always at 0", names, want)
	}
	// The last change is at 20 s: the lines hold until 20 s + 4% of the axis.
	to := 20 + minHold*20/(1-minHold)
	if s.from != 0 || s.to != to {
		t.Errorf("x from %v to %v, want 0 to %v", s.from, s.to, to)
	}
	want := map[string]plotter.XYs{
		"d-9 replicas":         {{X: 0, Y: 3}, {X: 10, Y: 2}, {X: 20, Y: 0}, {X: to, Y: 0}},
		"d-10 replicas":        {{X: 0, Y: 0}, {X: 10, Y: 2}, {X: 20, Y: 3}, {X: to, Y: 3}},
		"d-10 available":       {{X: 0, Y: 0}, {X: 10, Y: 0}, {X: 20, Y: 3}, {X: to, Y: 3}},
		"deployment available": {{X: 0, Y: 3}, {X: 10, Y: 2}, {X: 20, Y: 3}, {X: to, Y: 3}},
		"total":                {{X: 0, Y: 3}, {X: 10, Y: 4}, {X: 20, Y: 3}, {X: to, Y: 3}},
	}
	got := map[string]plotter.XYs{
		"d-9 replicas": s.replicaSets[0].replicas, "d-10 replicas": s.replicaSets[1].replicas,
		"d-10 available": s.replicaSets[1].available, "deployment available": s.available, "total": s.total,
	}
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("%s %v, want %v", name, got[name], w)
		}
	}
	if s.top != 4 {
		t.Errorf("top %v, want 4 (max total)", s.top)
	}
}

func TestSeriesOfEnd(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	samples := []Sample{{Time: at(0), Total: 1}, {Time: at(100), Total: 2}}
	tests := []struct {
		name     string
		r        Recording
		from, to float64
	}{
		{name: "last sample plus the hold", r: Recording{Start: start, Samples: samples}, to: 100 + minHold*100/(1-minHold)},
		{name: "a later End", r: Recording{Start: start, End: at(200), Samples: samples}, to: 200},
		{name: "a later event", r: Recording{Start: start, Samples: samples, Events: []Event{{Time: at(300)}}}, to: 300},
		{name: "no Start: the first sample", r: Recording{Samples: samples[1:]}, to: 1},
		{name: "a sample before Start", r: Recording{Start: at(50), Samples: samples}, from: -50, to: 50 + minHold*100/(1-minHold)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := seriesOf(&tc.r)
			if s.from != tc.from || s.to != tc.to {
				t.Errorf("x from %v to %v, want %v to %v", s.from, s.to, tc.from, tc.to)
			}
			if last := s.total[len(s.total)-1]; last.X != tc.to {
				t.Errorf("total ends at %v s, want %v", last.X, tc.to)
			}
		})
	}
}
