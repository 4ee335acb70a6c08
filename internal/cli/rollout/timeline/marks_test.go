package timeline

import (
	"slices"
	"testing"
	"time"
)

func TestMarksOf(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(s float64, typ, reason string) Event {
		return Event{Time: start.Add(time.Duration(s * float64(time.Second))), Type: typ, Reason: reason}
	}
	// Every label is 10 s wide.
	width := func(string) float64 { return 10 }
	tests := []struct {
		name   string
		events []Event
		want   []string // label@first tick's seconds
	}{
		{
			name:   "one event",
			events: []Event{ev(3, "Normal", "ScalingReplicaSet")},
			want:   []string{"ScalingReplicaSet@3"},
		},
		{
			name:   "same reason within a label's width merge",
			events: []Event{ev(1, "Normal", "ScalingReplicaSet"), ev(1.1, "Normal", "ScalingReplicaSet"), ev(11, "Normal", "ScalingReplicaSet")},
			want:   []string{"ScalingReplicaSet ×3@1"},
		},
		{
			name:   "same reason past a label's width do not",
			events: []Event{ev(1, "Normal", "ScalingReplicaSet"), ev(11.5, "Normal", "ScalingReplicaSet"), ev(12, "Normal", "ScalingReplicaSet")},
			want:   []string{"ScalingReplicaSet@1", "ScalingReplicaSet ×2@11.5"},
		},
		{
			name:   "interleaved reasons merge with their own",
			events: []Event{ev(1, "Normal", "ScalingReplicaSet"), ev(2, "Warning", "ReplicaSetCreateError"), ev(3, "Normal", "ScalingReplicaSet")},
			want:   []string{"ScalingReplicaSet ×2@1", "ReplicaSetCreateError@2"},
		},
		{
			name:   "a Warning does not merge with a Normal of the same reason",
			events: []Event{ev(1, "Normal", "FailedCreate"), ev(2, "Warning", "FailedCreate")},
			want:   []string{"FailedCreate@1", "FailedCreate@2"},
		},
		{
			name:   "unsorted events are put in time order",
			events: []Event{ev(30, "Normal", "B"), ev(5, "Normal", "A")},
			want:   []string{"A@5", "B@30"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range marksOf(start, tc.events, width) {
				got = append(got, m.label()+"@"+formatSeconds(m.xs[0]))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("marks %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMarksOfKeepsEveryTick(t *testing.T) {
	start := time.Unix(0, 0)
	events := []Event{{Time: start.Add(time.Second), Reason: "R"}, {Time: start.Add(2 * time.Second), Reason: "R"}}
	ms := marksOf(start, events, func(string) float64 { return 10 })
	if len(ms) != 1 || !slices.Equal(ms[0].xs, []float64{1, 2}) {
		t.Errorf("marks %+v, want one with ticks at 1 and 2 s", ms)
	}
}

func TestStagger(t *testing.T) {
	width := func(string) float64 { return 10 }
	normal := func(x float64) mark { return mark{xs: []float64{x}, reason: "N"} }
	warning := func(x float64) mark { return mark{xs: []float64{x}, reason: "W", warning: true} }
	tests := []struct {
		name     string
		marks    []mark
		rows     int
		wantRows []int
		wantUsed int
		leftward []bool
	}{
		{name: "apart share row 0", marks: []mark{normal(0), normal(11), normal(22)}, rows: 3, wantRows: []int{0, 0, 0}, wantUsed: 1},
		{name: "overlapping go up", marks: []mark{normal(0), normal(5), normal(11)}, rows: 3, wantRows: []int{0, 1, 0}, wantUsed: 2},
		{name: "warnings are placed first", marks: []mark{normal(0), warning(5)}, rows: 3, wantRows: []int{1, 0}, wantUsed: 2},
		{name: "no room leaves the label out", marks: []mark{normal(0), normal(1), normal(2)}, rows: 2, wantRows: []int{0, 1, -1}, wantUsed: 2},
		{name: "near the end the label points left", marks: []mark{normal(85), normal(95)}, rows: 3, wantRows: []int{0, 1}, wantUsed: 2, leftward: []bool{false, true}},
		{name: "leftward labels can share a row", marks: []mark{normal(70), normal(99)}, rows: 3, wantRows: []int{0, 0}, wantUsed: 1, leftward: []bool{false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := slices.Clone(tc.marks)
			used := stagger(ms, width, 100, tc.rows)
			var rows []int
			var leftward []bool
			for _, m := range ms {
				rows = append(rows, m.row)
				leftward = append(leftward, m.leftward)
			}
			if !slices.Equal(rows, tc.wantRows) || used != tc.wantUsed {
				t.Errorf("rows %v (%d used), want %v (%d used)", rows, used, tc.wantRows, tc.wantUsed)
			}
			if tc.leftward != nil && !slices.Equal(leftward, tc.leftward) {
				t.Errorf("leftward %v, want %v", leftward, tc.leftward)
			}
		})
	}
}
