package timeline

import (
	"fmt"
	"slices"
	"time"
)

// mark is a labelled group of events of the same type and reason close
// together on the timeline: a tick per event, one label at the first.
type mark struct {
	// xs are the events' times (seconds since the Recording's Start), in
	// order; the label goes at the first.
	xs      []float64
	reason  string
	warning bool
	// row is the label's row above the data, 0 the lowest; -1 when no row
	// had room and only the ticks are drawn.
	row int
	// leftward says the label ends at the tick instead of starting there,
	// for ticks near the right end of the axis.
	leftward bool
}

// label returns the mark's reason, with "×N" when it stands for N > 1
// events.
func (m mark) label() string {
	if len(m.xs) > 1 {
		return fmt.Sprintf("%s ×%d", m.reason, len(m.xs))
	}
	return m.reason
}

// marksOf returns the events as marks, ordered by their first event. An event joins the latest mark of
// the same type and reason when it comes within that mark's label, whose
// width in seconds width returns, so that no two labels of one reason
// would overlap.
func marksOf(start time.Time, events []Event, width func(label string) float64) []mark {
	sorted := slices.SortedStableFunc(slices.Values(events), func(a, b Event) int { return a.Time.Compare(b.Time) })
	var out []mark
	latest := map[[2]string]int{}
	for _, e := range sorted {
		x := seconds(start, e.Time)
		key := [2]string{e.Type, e.Reason}
		if i, ok := latest[key]; ok {
			m := &out[i]
			joined := mark{xs: append(slices.Clip(m.xs), x), reason: m.reason}
			if x-m.xs[0] <= width(joined.label()) {
				m.xs = joined.xs
				continue
			}
		}
		latest[key] = len(out)
		out = append(out, mark{xs: []float64{x}, reason: e.Reason, warning: e.Type == "Warning"})
	}
	return out
}

// stagger sets the marks' label rows so that no two labels in a row
// overlap: Warning marks first, then the others, each in time order, each
// to the lowest of at most rows rows where it fits, or to no row (-1). A
// label spans width(label) seconds from its first tick, or up to it when
// it would pass to, the end of the axis. It returns the number of rows
// used.
func stagger(ms []mark, width func(label string) float64, to float64, rows int) int {
	type span struct{ from, to float64 }
	var taken [][]span
	place := func(m *mark) {
		w := width(m.label())
		s := span{m.xs[0], m.xs[0] + w}
		if m.leftward = s.to > to; m.leftward {
			s = span{m.xs[0] - w, m.xs[0]}
		}
		free := func(row []span) bool {
			return !slices.ContainsFunc(row, func(o span) bool { return s.from < o.to && o.from < s.to })
		}
		m.row = slices.IndexFunc(taken, free)
		if m.row < 0 && len(taken) < rows {
			m.row = len(taken)
			taken = append(taken, nil)
		}
		if m.row >= 0 {
			taken[m.row] = append(taken[m.row], s)
		}
	}
	for _, warning := range []bool{true, false} {
		for i := range ms {
			if ms[i].warning == warning {
				place(&ms[i])
			}
		}
	}
	return len(taken)
}
