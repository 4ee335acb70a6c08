package timeline

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot/plotter"
)

// minHold is the least part of the x axis the last state is drawn over,
// so that a rollout watched until its last change still shows its end.
const minHold = 0.04

// series is what the timeline draws as step lines: x in seconds since the
// Recording's Start, y in pods.
type series struct {
	// start is time 0: the Recording's Start, or its first sample's time.
	start time.Time
	// from and to are the x axis' range (seconds).
	from, to float64
	// replicaSets are ordered by revision, the new ReplicaSet last.
	replicaSets []rsSeries
	// available and total are the Deployment's status.availableReplicas
	// and status.replicas.
	available, total plotter.XYs
	// top is the largest y drawn, bounds included (pods).
	top float64
}

// rsSeries is one ReplicaSet's spec.replicas and available pods over time.
type rsSeries struct {
	name, revision      string
	replicas, available plotter.XYs
}

// seriesOf returns r's step lines; r has at least one sample. Every line
// holds its last value until the end of the recording, which is the
// latest of End, the last sample and the last event, and at least minHold
// of the axis after the last sample.
func seriesOf(r *Recording) series {
	samples := slices.SortedStableFunc(slices.Values(r.Samples), func(a, b Sample) int { return a.Time.Compare(b.Time) })
	start := r.Start
	if start.IsZero() {
		start = samples[0].Time
	}
	last := seconds(start, samples[len(samples)-1].Time)
	s := series{start: start, from: min(0, seconds(start, samples[0].Time)), to: last}
	s.to = max(s.to, seconds(start, r.End))
	for _, e := range r.Events {
		s.to = max(s.to, seconds(start, e.Time))
	}
	s.to = max(s.to, last+minHold*(last-s.from)/(1-minHold), s.from+1)

	for _, smp := range samples {
		x := seconds(start, smp.Time)
		s.available = append(s.available, plotter.XY{X: x, Y: float64(smp.Available)})
		s.total = append(s.total, plotter.XY{X: x, Y: float64(smp.Total)})
	}
	s.replicaSets = rsSeriesOf(start, samples)
	s.available = hold(s.available, s.to)
	s.total = hold(s.total, s.to)
	s.top = float64(max(r.MaxTotal, r.MinAvailable, r.Replicas, 1))
	for _, xys := range [][]plotter.XY{s.available, s.total} {
		s.top = max(s.top, maxY(xys))
	}
	for i := range s.replicaSets {
		rs := &s.replicaSets[i]
		rs.replicas, rs.available = hold(rs.replicas, s.to), hold(rs.available, s.to)
		s.top = max(s.top, maxY(rs.replicas), maxY(rs.available))
	}
	return s
}

// rsSeriesOf returns the lines of every ReplicaSet that had replicas or
// available pods in some sample, ordered by revision (oldest first; the
// revision a ReplicaSet had last counts). A ReplicaSet missing from a
// sample has 0 replicas then.
func rsSeriesOf(start time.Time, samples []Sample) []rsSeries {
	var out []rsSeries
	index := map[string]int{}
	for _, smp := range samples {
		for _, rs := range smp.ReplicaSets {
			i, ok := index[rs.Name]
			if !ok {
				i = len(out)
				index[rs.Name] = i
				out = append(out, rsSeries{name: rs.Name})
			}
			out[i].revision = rs.Revision
		}
	}
	for _, smp := range samples {
		x := seconds(start, smp.Time)
		now := make([]ReplicaSet, len(out))
		for _, rs := range smp.ReplicaSets {
			now[index[rs.Name]] = rs
		}
		for i, rs := range now {
			out[i].replicas = append(out[i].replicas, plotter.XY{X: x, Y: float64(rs.Replicas)})
			out[i].available = append(out[i].available, plotter.XY{X: x, Y: float64(rs.Available)})
		}
	}
	out = slices.DeleteFunc(out, func(rs rsSeries) bool { return maxY(rs.replicas) == 0 && maxY(rs.available) == 0 })
	slices.SortStableFunc(out, func(a, b rsSeries) int { return cmp.Compare(revision(a.revision), revision(b.revision)) })
	return out
}

// revision returns a deployment.kubernetes.io/revision value as a number,
// -1 when it is missing or not a number.
func revision(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// hold returns xys with its last value repeated at x = to, so that a step
// line shows the last state until the end of the recording.
func hold(xys plotter.XYs, to float64) plotter.XYs {
	if len(xys) == 0 || xys[len(xys)-1].X >= to {
		return xys
	}
	return append(xys, plotter.XY{X: to, Y: xys[len(xys)-1].Y})
}

// maxY returns the largest y of xys, 0 for none.
func maxY(xys []plotter.XY) float64 {
	m := 0.0
	for _, p := range xys {
		m = max(m, p.Y)
	}
	return m
}

// seconds returns t - start in seconds, 0 for a zero t.
func seconds(start, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return t.Sub(start).Seconds()
}
