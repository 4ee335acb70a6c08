package deployment

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// maxMeasurementsInFlight bounds the measurements one controller takes at once (queries to Prometheus).
const maxMeasurementsInFlight = 16

// forgetRunAfter is how long an analysis run's measurements are kept for a sync that does not come (the
// Deployment deleted, its namespace moved to another shard, the step promoted).
const forgetRunAfter = 10 * time.Minute

// runID names one analysis run: of a Deployment (by UID, so a recreated one starts over), a revision and a
// step.
type runID struct {
	uid      types.UID
	revision int64
	step     int
}

// measurements takes EX-6's measurements off the sync workers: a sync starts those due (start), each in its
// own goroutine (at most maxMeasurementsInFlight at once) that enqueues the Deployment when done, and the next
// sync takes what finished (drain) and records it. The Deployment controller alone writes the record; a
// measurement taken but not yet recorded when the process dies is taken again, so nothing is invented and no
// recorded failure is lost.
type measurements struct {
	analyzer Analyzer
	enqueue  func(cache.ObjectName)
	slots    chan struct{}

	mu sync.Mutex
	// ctx is the controller's run context (measurements end with it); nil before Run.
	ctx  context.Context
	runs map[runID]*runMeasurements
}

// runMeasurements is one run's measurements in flight and finished, by metric name.
type runMeasurements struct {
	inFlight map[string]bool
	done     map[string][]timedMeasurement
	touched  time.Time
}

// timedMeasurement is a finished measurement and when it was started.
type timedMeasurement struct {
	analysis.Measurement
	at time.Time
}

func newMeasurements(a Analyzer, enqueue func(cache.ObjectName)) *measurements {
	return &measurements{analyzer: a, enqueue: enqueue, slots: make(chan struct{}, maxMeasurementsInFlight), runs: map[runID]*runMeasurements{}}
}

// setContext gives m the controller's run context; measurements start only once it is set.
func (m *measurements) setContext(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx = ctx
}

// run returns id's entry, adding it; m.mu is held.
func (m *measurements) run(id runID, now time.Time) *runMeasurements {
	r, ok := m.runs[id]
	if !ok {
		r = &runMeasurements{inFlight: map[string]bool{}, done: map[string][]timedMeasurement{}}
		m.runs[id] = r
	}
	r.touched = now
	return r
}

// start takes one measurement of metric for run id in the background, unless one of it is in flight or
// finished and not yet drained; when it finishes, key is enqueued.
func (m *measurements) start(key cache.ObjectName, id runID, metric analysis.Metric, args analysis.QueryArgs, pods []*v1.Pod, now time.Time) {
	m.mu.Lock()
	ctx := m.ctx
	r := m.run(id, now)
	busy := r.inFlight[metric.Name] || len(r.done[metric.Name]) > 0
	if ctx == nil || busy {
		m.mu.Unlock()
		return
	}
	r.inFlight[metric.Name] = true
	m.forgetStale(now)
	m.mu.Unlock()
	go func() {
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ms := m.analyzer.Measure(ctx, metric, args, pods)
		<-m.slots
		if ctx.Err() != nil {
			return // cut short by shutdown: not a measurement
		}
		m.mu.Lock()
		if r, ok := m.runs[id]; ok {
			delete(r.inFlight, metric.Name)
			r.done[metric.Name] = append(r.done[metric.Name], timedMeasurement{ms, now})
		}
		m.mu.Unlock()
		klog.FromContext(ctx).V(4).Info("Analysis measurement taken", "deployment", key, "metric", metric.Name, "phase", ms.Phase, "value", ms.Value)
		m.enqueue(key)
	}()
}

// drain records into run the measurements of run id finished since the last drain, for the metrics run already
// has or any metric, and returns the last one of each metric (for the events).
func (m *measurements) drain(id runID, run *rolloutstate.AnalysisRun) map[string]analysis.Measurement {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := map[string]analysis.Measurement{}
	r, ok := m.runs[id]
	if !ok {
		return last
	}
	for name, done := range r.done {
		for _, ms := range done {
			run.Metric(name).Record(rolloutstate.Measurement{Phase: rolloutstate.MeasurementPhase(ms.Phase), Value: ms.Value, At: metav1.NewTime(ms.at)})
			last[name] = ms.Measurement
		}
		delete(r.done, name)
	}
	return last
}

// forgetStale drops the runs no sync touched for forgetRunAfter; m.mu is held.
func (m *measurements) forgetStale(now time.Time) {
	for id, r := range m.runs {
		if now.Sub(r.touched) > forgetRunAfter && len(r.inFlight) == 0 {
			delete(m.runs, id)
		}
	}
}
