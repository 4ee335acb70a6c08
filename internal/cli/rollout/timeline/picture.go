package timeline

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Colours, from the Okabe-Ito palette that colour-blind readers can tell
// apart: the new ReplicaSet is blue, older ones orange, purple, brown and
// sky blue (newest first); red is kept for Warning events.
var (
	newColor       = color.RGBA{R: 0, G: 114, B: 178, A: 255}
	oldColors      = []color.Color{color.RGBA{R: 230, G: 159, A: 255}, color.RGBA{R: 204, G: 121, B: 167, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255}, color.RGBA{R: 86, G: 180, B: 233, A: 255}}
	availableColor = color.RGBA{R: 0, G: 158, B: 115, A: 255}
	totalColor     = color.RGBA{R: 80, G: 80, B: 80, A: 255}
	eventColor     = color.RGBA{R: 140, G: 140, B: 140, A: 255}
	warningColor   = color.RGBA{R: 213, A: 255}
)

// Layout, in points unless said otherwise.
const (
	// eventFontSize is the size of the event labels; eventRows is how many
	// rows of them may be stacked above the data.
	eventFontSize = 9
	eventRows     = 6
	// headroom separates the highest data from the top of the plot or the
	// lowest event label.
	headroom = 14
	// legendGap separates the plot from the legend on its right.
	legendGap = 8
	// maxName is the most characters of a ReplicaSet's name the legend
	// shows, so that a long name does not squeeze the plot.
	maxName = 40
)

// sans is the typeface of every text: sans serif reads better small.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// drawRecording draws r (at least one sample) on c: the plot on the left,
// its legend on the right, outside the data. The ReplicaSets' lines are
// drawn last, over the Deployment's, and come first in the legend.
func drawRecording(c draw.Canvas, r *Recording) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	s := seriesOf(r)
	p := newPlot(r, s)
	rsLines, rsEntries := replicaSetLines(s)
	dLines, dEntries := deploymentLines(r, s)
	p.Add(dLines...)
	p.Add(rsLines...)
	// Events from before the recording (an earlier rollout's) are left out.
	events := slices.DeleteFunc(slices.Clone(r.Events), func(e Event) bool { return seconds(s.start, e.Time) < s.from })
	legend := newLegend()
	for _, e := range slices.Concat(rsEntries, dEntries, eventEntries(events)) {
		legend.Add(e.text, e.thumb)
	}

	width := legend.Rectangle(c).Size().X
	plotArea := draw.Crop(c, 0, -(width + 2*legendGap), 0, 0)
	legendArea := draw.Crop(c, c.Size().X-width-legendGap, -legendGap, 0, -titleHeight(p)-legendGap)
	addEvents(p, events, plotArea, s)
	p.Draw(plotArea)
	legend.Draw(legendArea)
}

// newPlot returns a plot titled after r's Deployment, with s's axis ranges
// and a light grid.
func newPlot(r *Recording, s series) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("deployment %s/%s rollout", r.Namespace, r.Deployment)
	p.Title.TextStyle.Font = font.From(sans, 15)
	p.Title.Padding = 6
	p.X.Label.Text = "seconds since " + s.start.Format("2006-01-02 15:04:05 MST")
	p.Y.Label.Text = "pods"
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 12)
		a.Tick.Label.Font = font.From(sans, 10)
	}
	p.X.Min, p.X.Max = s.from, s.to
	p.Y.Min, p.Y.Max = 0, s.top
	p.Y.Tick.Marker = ticksUpTo(s.top)
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 225}
	grid.Horizontal.Color = color.Gray{Y: 225}
	p.Add(grid)
	return p
}

// ticksUpTo returns the default y ticks, only up to top (pods), so that
// the band of event labels above the data has none.
func ticksUpTo(top float64) plot.TickerFunc {
	return func(lo, _ float64) []plot.Tick {
		return plot.DefaultTicks{}.Ticks(lo, top)
	}
}

// newLegend returns an empty legend with its entries listed from its top
// left corner.
func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font = font.From(sans, 10)
	l.Padding = 3
	l.ThumbnailWidth = 26
	return l
}

// titleHeight returns the height the title takes above the data (points).
func titleHeight(p *plot.Plot) vg.Length {
	return p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
}

// entry is one legend line: its text and the plotter whose thumbnail
// goes with it.
type entry struct {
	text  string
	thumb plot.Thumbnailer
}

// replicaSetLines returns a step line per ReplicaSet for its spec.replicas
// (solid) and its available pods (dotted), in its colour, and their legend
// entries, labelled "rev N NAME" (NAME shortened), newest first.
func replicaSetLines(s series) ([]plot.Plotter, []entry) {
	var lines []plot.Plotter
	var entries []entry
	n := len(s.replicaSets)
	for age := range n {
		rs := s.replicaSets[n-1-age]
		var clr color.Color = newColor
		if age > 0 {
			clr = oldColors[(age-1)%len(oldColors)]
		}
		available := stepLine(rs.available, draw.LineStyle{Color: clr, Width: 1.5, Dashes: []vg.Length{2, 2}})
		replicas := stepLine(rs.replicas, draw.LineStyle{Color: clr, Width: 2.5})
		lines = append(lines, available, replicas)
		entries = append(entries, entry{fmt.Sprintf("rev %s %s", rev(rs.revision), shorten(rs.name)), replicas}, entry{fmt.Sprintf("rev %s available", rev(rs.revision)), available})
	}
	return lines, entries
}

// deploymentLines returns the Deployment's available and total pods as
// step lines and the bounds maxSurge and maxUnavailable set them as
// horizontal dashed lines of the same colours (total and max total grey,
// available and min available green), leaving out a bound that is 0, and
// their legend entries.
func deploymentLines(r *Recording, s series) ([]plot.Plotter, []entry) {
	total := stepLine(s.total, draw.LineStyle{Color: totalColor, Width: 1.2})
	available := stepLine(s.available, draw.LineStyle{Color: availableColor, Width: 1.8})
	lines := []plot.Plotter{total, available}
	entries := []entry{{"deployment available", available}, {"total pods", total}}
	if r.MaxTotal > 0 {
		line := bound(s, r.MaxTotal, totalColor)
		lines = append(lines, line)
		entries = append(entries, entry{fmt.Sprintf("max total (replicas+maxSurge) = %d", r.MaxTotal), line})
	}
	if r.MinAvailable > 0 {
		line := bound(s, r.MinAvailable, availableColor)
		lines = append(lines, line)
		entries = append(entries, entry{fmt.Sprintf("min available (replicas-maxUnavailable) = %d", r.MinAvailable), line})
	}
	return lines, entries
}

// bound returns a horizontal dashed line at y pods across s's x range.
func bound(s series, y int32, clr color.Color) *plotter.Line {
	xys := plotter.XYs{{X: s.from, Y: float64(y)}, {X: s.to, Y: float64(y)}}
	return &plotter.Line{XYs: xys, LineStyle: draw.LineStyle{Color: clr, Width: 1.2, Dashes: []vg.Length{7, 4}}}
}

// rev returns a ReplicaSet's revision as the legend shows it, "?" when it
// has none.
func rev(revision string) string {
	if revision == "" {
		return "?"
	}
	return revision
}

// shorten returns name, or "…" and its last maxName-1 characters when it
// is longer: the end of a ReplicaSet's name holds its pod-template-hash.
func shorten(name string) string {
	if r := []rune(name); len(r) > maxName {
		return "…" + string(r[len(r)-maxName+1:])
	}
	return name
}

// stepLine returns xys as a line whose values hold until the next point.
func stepLine(xys plotter.XYs, sty draw.LineStyle) *plotter.Line {
	return &plotter.Line{XYs: xys, StepStyle: plotter.PostStep, LineStyle: sty}
}

// eventEntries returns the legend entries for the event ticks, with one
// for Warning events when there are some.
func eventEntries(events []Event) []entry {
	if len(events) == 0 {
		return nil
	}
	entries := []entry{{"event (labelled with its reason)", &plotter.Line{LineStyle: tickStyle(false)}}}
	if slices.ContainsFunc(events, func(e Event) bool { return e.Type == "Warning" }) {
		entries = append(entries, entry{"Warning event", &plotter.Line{LineStyle: tickStyle(true)}})
	}
	return entries
}

// tickStyle returns the style of an event's tick: dotted grey, red for a
// Warning.
func tickStyle(warning bool) draw.LineStyle {
	clr := eventColor
	if warning {
		clr = warningColor
	}
	return draw.LineStyle{Color: clr, Width: 1, Dashes: []vg.Length{1, 2}}
}

// addEvents adds a tick per event from 0 pods up towards its mark's
// label, and the labels in rows above the data (see marksOf and stagger),
// and sets the y axis' top to leave headroom above the data and room for
// the rows. area is where the plot will be drawn.
func addEvents(p *plot.Plot, events []Event, area draw.Canvas, s series) {
	sty := text.Style{Font: font.From(sans, eventFontSize), Handler: p.TextHandler}
	data := p.DataCanvas(area)
	perPoint := (s.to - s.from) / float64(data.Size().X)
	width := func(label string) float64 { return float64(sty.Width(" "+label+" ")) * perPoint }
	ms := marksOf(s.start, events, width)
	rows := stagger(ms, width, s.to, eventRows)
	rowHeight := sty.Rectangle("Xg").Size().Y * 1.1
	h := data.Size().Y
	p.Y.Max = s.top * float64(h/(h-headroom-vg.Length(rows)*rowHeight))
	perPointY := p.Y.Max / float64(h)

	labels := &plotter.Labels{}
	for _, m := range ms {
		// The first tick reaches up to the label; the others, and those of a
		// mark without a label, stop below the lowest row.
		y := s.top + float64(headroom+vg.Length(m.row)*rowHeight)*perPointY
		for i, x := range m.xs {
			top := s.top + headroom*perPointY
			if i == 0 && m.row >= 0 {
				top = y + float64(rowHeight)*0.8*perPointY
			}
			p.Add(&plotter.Line{XYs: plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}}, LineStyle: tickStyle(m.warning)})
		}
		if m.row < 0 {
			continue
		}
		label, st := " "+m.label(), sty
		st.Color = tickStyle(m.warning).Color
		if m.leftward {
			label, st.XAlign = m.label()+" ", draw.XRight
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: m.xs[0], Y: y})
		labels.Labels = append(labels.Labels, label)
		labels.TextStyle = append(labels.TextStyle, st)
	}
	if len(labels.Labels) > 0 {
		p.Add(labels)
	}
	p.X.Min, p.X.Max, p.Y.Min = s.from, s.to, 0
}
