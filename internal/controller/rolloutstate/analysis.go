package rolloutstate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of EX-6 (analysis gates on rollout steps).
const (
	// RolloutAnalysisAnnotation names analysis templates ("NAME[,NAME]": ConfigMaps of the Deployment's namespace
	// labelled kubedeploy.io/analysis-template) run in the background from a rollout's first step to its
	// completion (EX-6). It is a policy annotation (EX-0).
	RolloutAnalysisAnnotation = "kubedeploy.io/rollout-analysis"
	// RolloutAnalysisStateAnnotation is the Deployment controller's record of the analyses of the current
	// revision's rollout (AnalysisRecord, JSON): per run, its start and per metric the measurement counts and the
	// last measurement. Bounded (MaxAnalysisMetrics, MaxMeasurementValue), so it never outgrows the annotation
	// limit; a restart, a new leader or a shard's new owner continues it rather than starting over or losing a
	// failure. Only the Deployment controller writes it.
	RolloutAnalysisStateAnnotation = "kubedeploy.io/rollout-analysis-state"
)

// Progressing reasons of EX-6.
const (
	// RolloutAnalysisRunning is the Progressing=True reason while an analysis step's run measures (EX-5, EX-6);
	// the progress deadline does not run meanwhile.
	RolloutAnalysisRunning = "RolloutAnalysisRunning"
	// RolloutAnalysisPaused is the Progressing=True reason while an analysis run that was Inconclusive or Error
	// (AnalysisRun.Phase) holds the rollout for a human: `kubedeploy rollout promote` goes on, `kubedeploy
	// rollout abort` rolls back. The progress deadline does not run meanwhile.
	RolloutAnalysisPaused = "RolloutAnalysisPaused"
)

// Bounds of RolloutAnalysisStateAnnotation.
const (
	// MaxAnalysisMetrics is the most metrics one analysis run may have (over all its templates).
	MaxAnalysisMetrics = 16
	// MaxMeasurementValue is the longest measurement value recorded, in bytes; a longer one is cut with "…".
	MaxMeasurementValue = 64
)

// StepAnalysis is an analysis step (EX-6): the rollout holds while the metrics of Templates (ConfigMaps of the
// Deployment's namespace) are measured, and goes on only when every one succeeded. Args are the values the
// templates' queries read as .Args.NAME.
type StepAnalysis struct {
	Templates []string      `json:"templates"`
	Args      []AnalysisArg `json:"args,omitempty"`
}

// AnalysisArg is one argument of an analysis step: a query template reads Value as .Args.Name.
type AnalysisArg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// check returns what is wrong with a, "" if nothing: no template, a template name that is not a ConfigMap name
// (DNS-1123 subdomain) or is given twice, an arg without a name or given twice.
func (a *StepAnalysis) check() string {
	if len(a.Templates) == 0 {
		return "analysis names no templates (want templates: [NAME, …])"
	}
	seen := map[string]bool{}
	for _, t := range a.Templates {
		if errs := validation.IsDNS1123Subdomain(t); len(errs) > 0 {
			return fmt.Sprintf("analysis template %q is not a ConfigMap name: %s", t, errs[0])
		}
		if seen[t] {
			return fmt.Sprintf("analysis template %q is named twice", t)
		}
		seen[t] = true
	}
	args := map[string]bool{}
	for _, arg := range a.Args {
		if arg.Name == "" {
			return "analysis arg without a name"
		}
		if args[arg.Name] {
			return fmt.Sprintf("analysis arg %q is given twice", arg.Name)
		}
		args[arg.Name] = true
	}
	return ""
}

// MeasurementPhase is the outcome of one measurement (EX-6), with Argo Rollouts' names.
type MeasurementPhase string

const (
	// MeasurementSuccessful: the success condition held (or, with only a failure condition, it did not).
	MeasurementSuccessful MeasurementPhase = "Successful"
	// MeasurementFailed: the failure condition held (or, with only a success condition, it did not).
	MeasurementFailed MeasurementPhase = "Failed"
	// MeasurementInconclusive: neither condition held, or there was no usable value (an empty result, NaN, more
	// than one series where one is expected, no pods).
	MeasurementInconclusive MeasurementPhase = "Inconclusive"
	// MeasurementError: no measurement (the query failed, timed out, the address is unreachable or refused).
	MeasurementError MeasurementPhase = "Error"
)

// AnalysisPhase is where an analysis run, or one of its metrics, stands (EX-6).
type AnalysisPhase string

const (
	// AnalysisRunning: measurements are still due.
	AnalysisRunning AnalysisPhase = "Running"
	// AnalysisSuccessful: every metric took its count of measurements within its limits, at least one successful.
	AnalysisSuccessful AnalysisPhase = "Successful"
	// AnalysisFailed: a metric failed more often than its failureLimit: the rollout aborts (EX-5's abort).
	AnalysisFailed AnalysisPhase = "Failed"
	// AnalysisInconclusive: a metric was inconclusive more often than its inconclusiveLimit, or took its count
	// with no successful measurement: the rollout waits for a human (promote goes on, abort rolls back).
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
	// AnalysisError: a metric erred more often in a row than its consecutiveErrorLimit: the rollout waits for a
	// human, as for AnalysisInconclusive.
	AnalysisError AnalysisPhase = "Error"
)

// Done reports whether p ends the run's measurements (anything but AnalysisRunning).
func (p AnalysisPhase) Done() bool { return p != AnalysisRunning }

// MetricLimits is what the phase rule reads of one metric's definition: Count measurements (≥ 1), each
// Interval after the one before, the first InitialDelay after the run started; the run fails past
// FailureLimit failed measurements, waits for a human past InconclusiveLimit inconclusive ones or past
// ConsecutiveErrorLimit errors in a row.
type MetricLimits struct {
	Count, FailureLimit, InconclusiveLimit, ConsecutiveErrorLimit int32
	Interval, InitialDelay                                        time.Duration
}

// Measurement is one recorded measurement: its phase, its value as shown (at most MaxMeasurementValue bytes) and
// when it was taken (whole seconds).
type Measurement struct {
	Phase MeasurementPhase `json:"phase"`
	Value string           `json:"value,omitempty"`
	At    metav1.Time      `json:"at"`
}

// MetricRecord is one metric's measurements so far: counts per phase, the errors in a row, and the last one.
type MetricRecord struct {
	Name             string       `json:"name"`
	Successful       int32        `json:"successful,omitempty"`
	Failed           int32        `json:"failed,omitempty"`
	Inconclusive     int32        `json:"inconclusive,omitempty"`
	Error            int32        `json:"error,omitempty"`
	ConsecutiveError int32        `json:"consecutiveError,omitempty"`
	Last             *Measurement `json:"last,omitempty"`
}

// Record adds m to r: its phase's count goes up; an Error adds to the errors in a row, any other phase ends
// them. The value is cut to MaxMeasurementValue bytes and the time truncated to a whole second.
func (r *MetricRecord) Record(m Measurement) {
	switch m.Phase {
	case MeasurementSuccessful:
		r.Successful++
	case MeasurementFailed:
		r.Failed++
	case MeasurementInconclusive:
		r.Inconclusive++
	default:
		m.Phase = MeasurementError
		r.Error++
		r.ConsecutiveError++
	}
	if m.Phase != MeasurementError {
		r.ConsecutiveError = 0
	}
	if len(m.Value) > MaxMeasurementValue {
		m.Value = m.Value[:MaxMeasurementValue-len("…")] + "…"
	}
	m.At = metav1.NewTime(m.At.Truncate(time.Second))
	r.Last = &m
}

// Measured returns the measurements that count toward the metric's count: every one with a value (Successful,
// Failed, Inconclusive). Errors are taken again at the next interval, up to consecutiveErrorLimit in a row.
func (r MetricRecord) Measured() int32 { return r.Successful + r.Failed + r.Inconclusive }

// Phase returns the metric's phase under l (EX-6): Failed past l.FailureLimit failures, else Inconclusive past
// l.InconclusiveLimit inconclusive measurements, else Error past l.ConsecutiveErrorLimit errors in a row; once
// l.Count measurements are taken, Successful if at least one was, else Inconclusive (never success on missing,
// empty or errored data: argo-rollouts#4479); Running before that.
func (r MetricRecord) Phase(l MetricLimits) AnalysisPhase {
	switch {
	case r.Failed > l.FailureLimit:
		return AnalysisFailed
	case r.Inconclusive > l.InconclusiveLimit:
		return AnalysisInconclusive
	case r.ConsecutiveError > l.ConsecutiveErrorLimit:
		return AnalysisError
	case r.Measured() < max(l.Count, 1):
		return AnalysisRunning
	case r.Successful > 0:
		return AnalysisSuccessful
	}
	return AnalysisInconclusive
}

// NextAt returns when the metric's next measurement is due for a run that started at since: since +
// l.InitialDelay for the first, the last one's time + l.Interval after that.
func (r MetricRecord) NextAt(since time.Time, l MetricLimits) time.Time {
	if r.Last == nil {
		return since.Add(l.InitialDelay)
	}
	return r.Last.At.Add(l.Interval)
}

// BackgroundRun is AnalysisRun.Step for the run of RolloutAnalysisAnnotation (from the first step to completion).
const BackgroundRun = -1

// AnalysisRun is one analysis of a rollout: of the analysis step at index Step, or the background one
// (BackgroundRun); when it started, and its metrics' records in the templates' order.
type AnalysisRun struct {
	Step  int         `json:"step"`
	Since metav1.Time `json:"since"`
	// Phase is the run's verdict once it is done (Successful, Failed, Inconclusive, Error), as the Deployment
	// controller decided it from the templates' limits then; empty while it runs. A recorded verdict stands even
	// if the templates change afterwards.
	Phase AnalysisPhase `json:"phase,omitempty"`
	// Promoted is set on a background run that was Inconclusive or Error when `kubedeploy rollout promote` went
	// on past it (EX-6): it holds the rollout no more and takes no more measurements; its verdict stays.
	Promoted bool           `json:"promoted,omitempty"`
	Metrics  []MetricRecord `json:"metrics"`
}

// Paused reports whether run ended Inconclusive or Error and waits for a human: not yet promoted past.
func (run *AnalysisRun) Paused() bool {
	return run != nil && (run.Phase == AnalysisInconclusive || run.Phase == AnalysisError) && !run.Promoted
}

// Metric returns the record of the metric named name, adding an empty one when there is none yet.
func (run *AnalysisRun) Metric(name string) *MetricRecord {
	for i := range run.Metrics {
		if run.Metrics[i].Name == name {
			return &run.Metrics[i]
		}
	}
	run.Metrics = append(run.Metrics, MetricRecord{Name: name})
	return &run.Metrics[len(run.Metrics)-1]
}

// Evaluate returns the run's phase for its metrics' limits (by metric name; a metric without a record yet is
// Running): Failed when any metric failed, else Inconclusive or Error when any waits for a human, else Successful
// when every one succeeded, else Running. metric names the metric that decided a Failed, Inconclusive or Error
// phase ("" otherwise). A run with no metrics is Running: it never succeeds on nothing.
func (run AnalysisRun) Evaluate(limits map[string]MetricLimits, order []string) (phase AnalysisPhase, metric string) {
	phases := make([]AnalysisPhase, len(order))
	for i, name := range order {
		phases[i] = AnalysisRunning
		for _, r := range run.Metrics {
			if r.Name == name {
				phases[i] = r.Phase(limits[name])
			}
		}
	}
	for _, want := range []AnalysisPhase{AnalysisFailed, AnalysisInconclusive, AnalysisError} {
		for i, p := range phases {
			if p == want {
				return p, order[i]
			}
		}
	}
	if len(order) == 0 {
		return AnalysisRunning, ""
	}
	for _, p := range phases {
		if p != AnalysisSuccessful {
			return AnalysisRunning, ""
		}
	}
	return AnalysisSuccessful, ""
}

// AnalysisRecord is RolloutAnalysisStateAnnotation's value: the runs of revision Revision's rollout (at most
// one per analysis step and the background one).
type AnalysisRecord struct {
	Revision int64         `json:"revision"`
	Runs     []AnalysisRun `json:"runs"`
}

// AnalysisRecordOf reads d's RolloutAnalysisStateAnnotation for revision: an empty record for revision when the
// annotation is missing, does not parse, or is for another revision (a new rollout starts its analyses over).
func AnalysisRecordOf(d *appsv1.Deployment, revision int64) AnalysisRecord {
	var rec AnalysisRecord
	if v, ok := d.Annotations[RolloutAnalysisStateAnnotation]; !ok || json.Unmarshal([]byte(v), &rec) != nil || rec.Revision != revision {
		return AnalysisRecord{Revision: revision}
	}
	return rec
}

// Run returns the record's run for step (an index or BackgroundRun), nil when it has not started.
func (rec *AnalysisRecord) Run(step int) *AnalysisRun {
	for i := range rec.Runs {
		if rec.Runs[i].Step == step {
			return &rec.Runs[i]
		}
	}
	return nil
}

// Start returns the run for step, starting it at since (whole seconds, rounded up) when it has not started.
func (rec *AnalysisRecord) Start(step int, since time.Time) *AnalysisRun {
	if run := rec.Run(step); run != nil {
		return run
	}
	rec.Runs = append(rec.Runs, AnalysisRun{Step: step, Since: metav1.NewTime(ceilSecond(since))})
	return &rec.Runs[len(rec.Runs)-1]
}

// Encode returns rec as RolloutAnalysisStateAnnotation's value.
func (rec AnalysisRecord) Encode() string {
	b, _ := json.Marshal(rec) // plain fields: never fails
	return string(b)
}

// String describes a for events and messages: "analysis error-rate" or "analysis error-rate, latency".
func (a *StepAnalysis) String() string {
	s := "analysis"
	for i, t := range a.Templates {
		if i > 0 {
			s += ","
		}
		s += " " + t
	}
	return s
}

// ArgsMap returns a's args by name, for the query templates' .Args.
func (a *StepAnalysis) ArgsMap() map[string]string {
	m := make(map[string]string, len(a.Args))
	for _, arg := range a.Args {
		m[arg.Name] = arg.Value
	}
	return m
}

// BackgroundAnalysisOf reads d's RolloutAnalysisAnnotation ("NAME[,NAME]", spaces around names ignored) as the
// analysis it names: nil, nil without the annotation; an error naming the fault for an empty list, a name that
// is not a ConfigMap name or a name given twice.
func BackgroundAnalysisOf(d *appsv1.Deployment) (*StepAnalysis, error) {
	v, ok := d.Annotations[RolloutAnalysisAnnotation]
	if !ok {
		return nil, nil
	}
	a := &StepAnalysis{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			a.Templates = append(a.Templates, name)
		}
	}
	if why := a.check(); why != "" {
		return nil, fmt.Errorf("invalid %s %q: %s", RolloutAnalysisAnnotation, v, why)
	}
	return a, nil
}

// BackgroundHeldMessage is the Progressing=True message while the background analysis (RolloutAnalysisAnnotation,
// a) holds subject, of Deployment name, with updated of replicas pods on the new template (EX-6): paused
// (Inconclusive or Error) for a human, or, with why, unable to measure (templates that cannot be used).
func BackgroundHeldMessage(subject, name string, a *StepAnalysis, phase AnalysisPhase, why string, updated, replicas int32) string {
	head := fmt.Sprintf("%s has %d of %d pods updated, held by the background %s", subject, updated, replicas, a)
	if why != "" && phase == "" {
		return fmt.Sprintf("%s: %s.", head, why)
	}
	return fmt.Sprintf("%s: it ended %s; `kubedeploy rollout promote deploy/%s` goes on without it, `kubedeploy rollout abort deploy/%s` rolls back.",
		head, phase, name, name)
}

// AnalysisHeldMessage is the Progressing=True message while analysis step st.Step of steps holds subject, of
// Deployment name, with updated of replicas pods on the new template (EX-6): which step and, by the run's
// phase (AnalysisRun.Phase; "" while it measures), what it waits for; why, when not empty, says what keeps a
// measuring run from measuring (templates that cannot be used). It does not change with each measurement, so a
// running analysis does not rewrite the condition.
func AnalysisHeldMessage(subject, name string, steps Steps, st StepState, phase AnalysisPhase, why string, updated, replicas int32) string {
	head := fmt.Sprintf("%s has %d of %d pods updated, held by rollout step %d of %d (%s)", subject, updated, replicas, st.Step+1, len(steps), steps[st.Step])
	switch {
	case phase == AnalysisInconclusive || phase == AnalysisError:
		return fmt.Sprintf("%s: the analysis ended %s; `kubedeploy rollout promote deploy/%s` goes on, `kubedeploy rollout abort deploy/%s` rolls back.",
			head, phase, name, name)
	case why != "":
		return fmt.Sprintf("%s: %s.", head, why)
	}
	return head + " while its metrics are measured."
}
