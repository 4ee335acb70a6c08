package deployment

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Event reasons of EX-6. Events come on a run's phase changes, never on every measurement.
const (
	// AnalysisSuccessful is the Normal event reason of an analysis run whose every metric succeeded.
	AnalysisSuccessful = "AnalysisSuccessful"
	// AnalysisFailed is the Warning event reason of a run a metric failed (past its failureLimit); the rollout
	// is then aborted (RolloutAborted follows). The message names the metric, its last value and why.
	AnalysisFailed = "AnalysisFailed"
	// AnalysisPaused is the Warning event reason of a run Inconclusive or Error past its metric's limit: the
	// rollout waits for `kubedeploy rollout promote` or `abort`. The message names the metric, its last value
	// and why.
	AnalysisPaused = "AnalysisPaused"
	// AnalysisTemplateInvalid is the Warning event reason while an analysis step's templates cannot be read or
	// used (missing, unlabelled, invalid); the rollout holds at the step and nothing is measured.
	AnalysisTemplateInvalid = "AnalysisTemplateInvalid"
	// AnalysisPromoted is the Normal event reason of `kubedeploy rollout promote` going on past a background
	// analysis that paused the rollout (kubedeploy.io/rollout-analysis): that run measures no more.
	AnalysisPromoted = "AnalysisPromoted"
	// AnalysisIgnored is the Warning event reason while a Deployment with kubedeploy.io/rollout-analysis but no
	// kubedeploy.io/rollout-steps rolls out: the background analysis runs only beside steps.
	AnalysisIgnored = "AnalysisIgnored"
)

// runName names run of analysis a for events: "rollout step 2 (analysis error-rate)", or "the background
// analysis error-rate" for the run of kubedeploy.io/rollout-analysis.
func runName(run *rolloutstate.AnalysisRun, a *rolloutstate.StepAnalysis) string {
	if run.Step == rolloutstate.BackgroundRun {
		return "the background " + a.String()
	}
	return fmt.Sprintf("rollout step %d (%s)", run.Step+1, a)
}

// templateRetry is how soon a step whose templates could not be read looks again (they may be created later).
const templateRetry = 30 * time.Second

// Analyzer is what the Deployment controller takes EX-6's measurements with: it reads the metrics of an
// analysis step's templates (ConfigMaps of the Deployment's namespace; an error names the template and the
// fault) and takes one measurement of a metric (blocking up to the metric's timeout; never an error: what goes
// wrong is an Error or Inconclusive measurement). internal/analysis's Source is the production one.
type Analyzer interface {
	Templates(ctx context.Context, namespace string, names []string, args []analysis.Arg) ([]analysis.Metric, error)
	Measure(ctx context.Context, m analysis.Metric, args analysis.QueryArgs, pods []*v1.Pod) analysis.Measurement
}

// analysisHold is what the current analysis step holds the rollout with: the run's phase ("" while it
// measures) and, for the condition's message, why it waits.
type analysisHold struct {
	phase rolloutstate.AnalysisPhase
	why   string
}

// syncAnalysis runs the analysis of the step p is at (EX-6) for revision p.State.Revision: it records the
// measurements taken since the last sync, decides the run's phase from its templates' limits (with a Normal
// or Warning event when it ends), starts the measurements that are due and asks to be synced again when the
// next one is. The record goes on d through the status subresource, as the step's does. A run decided Failed
// is aborted by the sync (abortDue). Templates that cannot be read hold the step with a Warning event and
// nothing measured. It returns the API error of the record.
func (sc *syncContext) syncAnalysis(ctx context.Context, steps rolloutstate.Steps, p rolloutstate.StepProgress) error {
	step := steps[p.State.Step].Analysis
	rec := rolloutstate.AnalysisRecordOf(sc.d, p.State.Revision)
	stored := sc.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation]
	run := rec.Start(p.State.Step, p.State.Since.Time)
	hold := &analysisHold{phase: run.Phase}
	sc.partition.steps.analysis = hold
	if run.Phase == "" && sc.c.analyses != nil {
		sc.measureStep(ctx, step, run, hold)
	}
	if rec.Encode() == stored {
		return nil
	}
	sc.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] = rec.Encode()
	sc.pausedCondition()
	if err := sc.writeStatus(ctx); err != nil {
		return fmt.Errorf("recording the analysis of step %d of revision %d: %w", p.State.Step+1, p.State.Revision, err)
	}
	return nil
}

// pausedCondition puts the Progressing condition a paused run (Inconclusive or Error) holds the rollout with
// on sc.d's status, so that the write recording the verdict carries it: no reader sees a run paused on a
// Deployment that still says RolloutAnalysisRunning. The rest of the sync computes the same condition and
// writes again only if the counts moved. Nothing changes for a run measuring or decided otherwise, or
// without a progress deadline (no Progressing condition).
func (sc *syncContext) pausedCondition() {
	if !rolloutstate.HasProgressDeadline(sc.d) || sc.partition.steps == nil {
		return
	}
	hold := sc.partition.hold(sc.d, &sc.d.Status, sc.newRS, sc.allRSs())
	if hold == nil || hold.Reason != rolloutstate.RolloutAnalysisPaused {
		return
	}
	var cur *appsv1.DeploymentCondition // a copy: the condition is replaced in the same slice
	if c := rolloutstate.Condition(&sc.d.Status, appsv1.DeploymentProgressing); c != nil {
		cur = c.DeepCopy()
	}
	setProgressingCondition(sc.d, &sc.d.Status, sc.newRS, hold, cur, sc.now)
}

// measureStep does syncAnalysis's work on a run still measuring: records, decides, starts what is due.
func (sc *syncContext) measureStep(ctx context.Context, step *rolloutstate.StepAnalysis, run *rolloutstate.AnalysisRun, hold *analysisHold) {
	metrics, err := sc.c.analyses.analyzer.Templates(ctx, sc.d.Namespace, step.Templates, analysisArgs(step))
	if err == nil && len(metrics) > rolloutstate.MaxAnalysisMetrics {
		err = fmt.Errorf("%d metrics, at most %d per analysis", len(metrics), rolloutstate.MaxAnalysisMetrics)
	}
	if err != nil {
		hold.why = "its templates cannot be used: " + err.Error()
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, AnalysisTemplateInvalid, "Revision %d: %s: %v; holding until fixed", sc.newRevision(), runName(run, step), err)
		sc.requeueAt(templateRetry)
		return
	}
	id := runID{uid: sc.d.UID, revision: sc.newRevision(), step: run.Step}
	last := sc.c.analyses.drain(id, run)
	limits, order := metricLimits(metrics)
	phase, metric := run.Evaluate(limits, order)
	if phase.Done() {
		run.Phase, hold.phase = phase, phase
		sc.analysisEnded(step, run, metric, last[metric])
		return
	}
	for _, m := range metrics {
		next := run.Metric(m.Name).NextAt(run.Since.Time, limits[m.Name])
		if wait := next.Sub(sc.now); wait > 0 {
			sc.requeueAt(wait)
			continue
		}
		sc.c.analyses.start(sc.key, id, m, sc.queryArgs(step), sc.newPods(), sc.now)
	}
}

// requeueAt asks for the next sync within wait at the latest (the earliest of the asks wins).
func (sc *syncContext) requeueAt(wait time.Duration) {
	wait += 100 * time.Millisecond
	if sc.requeueAfter == 0 || wait < sc.requeueAfter {
		sc.requeueAfter = wait
	}
}

// analysisEnded emits the event of a run that just ended with phase, metric naming the metric that decided
// a Failed or paused one, last its last measurement in this process (zero after a restart: the record's value
// is named instead).
func (sc *syncContext) analysisEnded(step *rolloutstate.StepAnalysis, run *rolloutstate.AnalysisRun, metric string, last analysis.Measurement) {
	rev := sc.newRevision()
	if run.Phase == rolloutstate.AnalysisSuccessful {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeNormal, AnalysisSuccessful, "Revision %d: %s succeeded: %s", rev, runName(run, step), countsOf(run))
		return
	}
	why := last.Message
	if why == "" {
		if r := run.Metric(metric); r.Last != nil {
			why = fmt.Sprintf("last value %q (%s)", r.Last.Value, r.Last.Phase)
		}
	}
	reason, then := AnalysisPaused, fmt.Sprintf("holding for `kubedeploy rollout promote deploy/%s` or `kubedeploy rollout abort deploy/%s`", sc.d.Name, sc.d.Name)
	if run.Phase == rolloutstate.AnalysisFailed {
		reason, then = AnalysisFailed, "aborting the rollout"
	}
	sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, reason, "Revision %d: %s is %s on metric %q: %s; %s",
		rev, runName(run, step), run.Phase, metric, why, then)
	sc.logger.Info("Analysis ended", "revision", rev, "run", runName(run, step), "phase", run.Phase, "metric", metric)
}

// countsOf says a run's measurements per metric: "error-rate 3/3 successful".
func countsOf(run *rolloutstate.AnalysisRun) string {
	parts := make([]string, 0, len(run.Metrics))
	for _, r := range run.Metrics {
		parts = append(parts, fmt.Sprintf("%s %d/%d successful", r.Name, r.Successful, r.Measured()))
	}
	return strings.Join(parts, ", ")
}

// metricLimits returns each metric's limits by name, and the names in the templates' order.
func metricLimits(metrics []analysis.Metric) (map[string]rolloutstate.MetricLimits, []string) {
	limits := make(map[string]rolloutstate.MetricLimits, len(metrics))
	order := make([]string, 0, len(metrics))
	for _, m := range metrics {
		s := m.Settings()
		limits[m.Name] = rolloutstate.MetricLimits{Count: s.Count, FailureLimit: s.FailureLimit, InconclusiveLimit: s.InconclusiveLimit,
			ConsecutiveErrorLimit: s.ConsecutiveErrorLimit, Interval: s.Interval, InitialDelay: s.InitialDelay}
		order = append(order, m.Name)
	}
	return limits, order
}

// analysisArgs returns step's args as internal/analysis takes them.
func analysisArgs(step *rolloutstate.StepAnalysis) []analysis.Arg {
	args := make([]analysis.Arg, len(step.Args))
	for i, a := range step.Args {
		args[i] = analysis.Arg{Name: a.Name, Value: a.Value}
	}
	return args
}

// queryArgs returns what a query template reads (EX-6): the namespace, the Deployment, the new and stable
// ReplicaSets' pod-template-hash (stable: the last complete revision's ReplicaSet, else the old one with the
// most replicas), the revision and step's args.
func (sc *syncContext) queryArgs(step *rolloutstate.StepAnalysis) analysis.QueryArgs {
	qa := analysis.QueryArgs{Namespace: sc.d.Namespace, Deployment: sc.d.Name, Revision: sc.newRevision(), Args: step.ArgsMap()}
	if sc.newRS != nil {
		qa.NewPodTemplateHash = sc.newRS.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	stable := rolloutstate.PlanAutoRollback(sc.d, sc.newRS, sc.oldRSs).Target
	if stable == nil {
		stable = largestOld(sc.oldRSs)
	}
	if stable != nil {
		qa.StablePodTemplateHash = stable.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	return qa
}

// newPods returns the new ReplicaSet's pods from the cache (the pods provider's), nil without one or when the
// pod cache cannot be read (logged: the analysis then runs without pods).
func (sc *syncContext) newPods() []*v1.Pod {
	if sc.newRS == nil {
		return nil
	}
	pods, err := sc.podMap()
	if err != nil {
		sc.logger.Error(err, "Reading the new ReplicaSet's pods for an analysis run", "replicaSet", klog.KObj(sc.newRS))
		return nil
	}
	return append([]*v1.Pod(nil), pods[sc.newRS.UID]...)
}

// analysisFailed reports whether the current revision's analysis run at d's current step, or its background
// run, was decided Failed (EX-6): the sync then aborts the rollout as `kubedeploy rollout abort` would.
func (sc *syncContext) analysisFailed() bool {
	rev := sc.newRevision()
	rec := rolloutstate.AnalysisRecordOf(sc.d, rev)
	if run := rec.Run(rolloutstate.BackgroundRun); run != nil && run.Phase == rolloutstate.AnalysisFailed {
		return true
	}
	_, st, ok := rolloutstate.RecordedStep(sc.d, fmt.Sprint(rev))
	if !ok {
		return false
	}
	run := rec.Run(st.Step)
	return run != nil && run.Phase == rolloutstate.AnalysisFailed
}

// analysisCondition returns the Progressing condition the current analysis step holds the rollout with (the
// step's pods updated and available): True with RolloutAnalysisPaused once its run ended Inconclusive or Error,
// else RolloutAnalysisRunning; a run decided Successful or Failed is past holding (the step advances or the
// rollout is aborted) and keeps RolloutAnalysisRunning until then.
func (s *rolloutSteps) analysisCondition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, replicas int32) *appsv1.DeploymentCondition {
	hold := s.analysis
	if hold == nil { // not synced in this pass (a paused Deployment): as recorded
		hold = &analysisHold{}
		rec := rolloutstate.AnalysisRecordOf(d, s.progress.State.Revision)
		if run := rec.Run(s.progress.State.Step); run != nil {
			hold.phase = run.Phase
		}
	}
	reason := rolloutstate.RolloutAnalysisRunning
	if hold.phase == rolloutstate.AnalysisInconclusive || hold.phase == rolloutstate.AnalysisError {
		reason = rolloutstate.RolloutAnalysisPaused
	}
	msg := rolloutstate.AnalysisHeldMessage(progressSubject(d, newRS), d.Name, s.steps, s.progress.State, hold.phase, hold.why, status.UpdatedReplicas, replicas)
	return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: reason, Message: msg}
}
