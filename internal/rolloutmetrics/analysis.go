package rolloutmetrics

import (
	"math"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Analysis is what the rollout metrics report of one Deployment's analyses (EX-6), from its
// rolloutstate.RolloutAnalysisStateAnnotation as last observed: the measurements of its current revision's runs
// and the runs that hold its rollout in progress now.
type Analysis struct {
	Namespace, Deployment string
	// Metrics are the record's metrics, each name once in the order first recorded: the counts summed over the
	// runs that measured it, and the latest last measurement of them. The counts only grow within a revision.
	Metrics []rolloutstate.MetricRecord
	// Runs are the runs that hold the rollout in progress now, in the record's order.
	Runs []HoldingRun
}

// HoldingRun is an analysis run that holds a rollout in progress (EX-6): Running while it measures, or
// Inconclusive or Error while it waits for a human (Progressing reason RolloutAnalysisPaused).
type HoldingRun struct {
	// Run is "step-N" for the analysis step N (1-based, as kubedeploy_rollout_step), "background" for the run of
	// kubedeploy.io/rollout-analysis: bounded by the steps.
	Run   string
	Phase rolloutstate.AnalysisPhase
	// Since is when the run started (Running) or when the measurement that decided it was taken (waiting for a
	// human).
	Since time.Time
}

// BackgroundRunLabel is HoldingRun.Run of the background run (rolloutstate.BackgroundRun).
const BackgroundRunLabel = "background"

// analysisOf returns what the metrics report of d's analyses; inProgress says the tracker has a rollout of d in
// progress. The record reported is the current revision's (deployment.kubernetes.io/revision) or, while the
// current revision is the rollback of an aborted one (rolloutstate.AutoRolledBackFrom: an abort by hand or by a
// failed analysis, EX-5 and EX-2), the aborted revision's, so the measurements that failed it stay visible until
// the next rollout. Runs hold only in the current revision's record, while its rollout is in progress: a
// Running run of the current step or the background run; an Inconclusive or Error one, likewise, while the
// Progressing reason is RolloutAnalysisPaused.
func analysisOf(d *appsv1.Deployment, inProgress bool) Analysis {
	a := Analysis{Namespace: d.Namespace, Deployment: d.Name}
	revision, err := strconv.ParseInt(d.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if err != nil {
		return a
	}
	rec := rolloutstate.AnalysisRecordOf(d, revision)
	if failed, ok := rolloutstate.AutoRolledBackFrom(d); ok && len(rec.Runs) == 0 {
		a.Metrics = metricsOf(rolloutstate.AnalysisRecordOf(d, failed))
		return a
	}
	a.Metrics = metricsOf(rec)
	if inProgress {
		a.Runs = holdingRuns(d, rec)
	}
	return a
}

// metricsOf sums rec's metric records by name over its runs, keeping the latest last measurement. Only the
// first rolloutstate.MaxAnalysisMetrics of a run count, the controller's bound, so the metric label stays
// bounded even when someone else wrote the annotation.
func metricsOf(rec rolloutstate.AnalysisRecord) []rolloutstate.MetricRecord {
	var out []rolloutstate.MetricRecord
	index := map[string]int{}
	for _, run := range rec.Runs {
		for _, m := range run.Metrics[:min(len(run.Metrics), rolloutstate.MaxAnalysisMetrics)] {
			i, ok := index[m.Name]
			if !ok {
				index[m.Name], i = len(out), len(out)
				out = append(out, rolloutstate.MetricRecord{Name: m.Name})
			}
			sum := &out[i]
			sum.Successful += m.Successful
			sum.Failed += m.Failed
			sum.Inconclusive += m.Inconclusive
			sum.Error += m.Error
			if m.Last != nil && (sum.Last == nil || !m.Last.At.Before(&sum.Last.At)) {
				sum.Last = m.Last
			}
		}
	}
	return out
}

// holdingRuns returns the runs of rec, d's current revision's record, that hold d's rollout now. A step's run
// holds while the step recorded for the revision (rolloutstate.RolloutStepAnnotation) is that step: the steps
// themselves need not be read, a run is only ever recorded for an analysis step.
func holdingRuns(d *appsv1.Deployment, rec rolloutstate.AnalysisRecord) []HoldingRun {
	st, ok := rolloutstate.StepStateOf(d)
	atStep := ok && st.Revision == rec.Revision
	progressing := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	paused := progressing != nil && progressing.Reason == rolloutstate.RolloutAnalysisPaused
	var out []HoldingRun
	for _, run := range rec.Runs {
		label := BackgroundRunLabel
		if run.Step != rolloutstate.BackgroundRun {
			if !atStep || run.Step != st.Step {
				continue // a step the rollout has left (promoted, or done) or not reached
			}
			label = "step-" + strconv.Itoa(run.Step+1)
		}
		switch run.Phase {
		case "", rolloutstate.AnalysisRunning:
			out = append(out, HoldingRun{Run: label, Phase: rolloutstate.AnalysisRunning, Since: run.Since.Time})
		case rolloutstate.AnalysisInconclusive, rolloutstate.AnalysisError:
			if paused {
				out = append(out, HoldingRun{Run: label, Phase: run.Phase, Since: decidedAt(run)})
			}
		}
	}
	return out
}

// decidedAt is when run's phase was decided: its latest measurement's time (the controller decides a run when
// it records a measurement), its start when it has none.
func decidedAt(run rolloutstate.AnalysisRun) time.Time {
	at := run.Since.Time
	for _, m := range run.Metrics {
		if m.Last != nil && m.Last.At.After(at) {
			at = m.Last.At.Time
		}
	}
	return at
}

// measurementPhases are the phases kubedeploy_analysis_measurements_total counts, each sent for every metric (0
// included, so that increase() sees a metric's first measurement of a phase).
var measurementPhases = []rolloutstate.MeasurementPhase{
	rolloutstate.MeasurementSuccessful, rolloutstate.MeasurementFailed,
	rolloutstate.MeasurementInconclusive, rolloutstate.MeasurementError,
}

// countOf returns r's count of measurements of phase p.
func countOf(r rolloutstate.MetricRecord, p rolloutstate.MeasurementPhase) int32 {
	switch p {
	case rolloutstate.MeasurementSuccessful:
		return r.Successful
	case rolloutstate.MeasurementFailed:
		return r.Failed
	case rolloutstate.MeasurementInconclusive:
		return r.Inconclusive
	}
	return r.Error
}

// lastValue returns r's last measurement's value as a number, ok only when it has one that parses as a finite
// float (a Prometheus result; not a pods result, "ready=3 notReady=0 …", nor NaN or ±Inf).
func lastValue(r rolloutstate.MetricRecord) (v float64, ok bool) {
	if r.Last == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(r.Last.Value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// empty reports whether a has nothing to report.
func (a Analysis) empty() bool { return len(a.Metrics) == 0 && len(a.Runs) == 0 }
