package rolloutmetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// measured is a metric record with the given counts (successful, failed, inconclusive, errors) whose last
// measurement, of phase p and value v, was taken at s seconds.
func measured(name string, counts [4]int32, p rolloutstate.MeasurementPhase, v string, s float64) rolloutstate.MetricRecord {
	return rolloutstate.MetricRecord{Name: name, Successful: counts[0], Failed: counts[1], Inconclusive: counts[2], Error: counts[3],
		Last: &rolloutstate.Measurement{Phase: p, Value: v, At: metav1.NewTime(at(s))}}
}

// analysisDeployment is Deployment ns/web at revision rev, with the analysis record rec, the step state step
// (nil: none) and the Progressing reason reason.
func analysisDeployment(rev string, rec *rolloutstate.AnalysisRecord, step *rolloutstate.StepState, reason string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns",
		Annotations: map[string]string{rolloutstate.RevisionAnnotation: rev}}}
	if rec != nil {
		d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] = rec.Encode()
	}
	if step != nil {
		d.Annotations[rolloutstate.RolloutStepAnnotation] = step.Encode()
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: reason}}
	return d
}

// run is an analysis run of step (rolloutstate.BackgroundRun for the background one) started at 10 s.
func run(step int, phase rolloutstate.AnalysisPhase, metrics ...rolloutstate.MetricRecord) rolloutstate.AnalysisRun {
	return rolloutstate.AnalysisRun{Step: step, Since: metav1.NewTime(at(10)), Phase: phase, Metrics: metrics}
}

// EX-6: what the metrics report of a Deployment's analyses, from its record alone: the current revision's
// counts summed by metric over the runs with the latest last measurement (an aborted revision's while its
// rollback runs), and the runs that hold the rollout in progress (a running one of the current step or the
// background, a paused one only while the Progressing reason says so).
func TestAnalysisOf(t *testing.T) {
	errRate := measured("error-rate", [4]int32{2, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "0.004", 30)
	restarts := measured("restarts", [4]int32{0, 0, 1, 1}, rolloutstate.MeasurementInconclusive, "ready=1 notReady=2 restarts=0 total=3", 40)
	bgErrRate := measured("error-rate", [4]int32{1, 1, 0, 0}, rolloutstate.MeasurementFailed, "0.2", 35)
	rec := func(rev int64, runs ...rolloutstate.AnalysisRun) *rolloutstate.AnalysisRecord {
		return &rolloutstate.AnalysisRecord{Revision: rev, Runs: runs}
	}
	step := func(rev int64, i int) *rolloutstate.StepState { return &rolloutstate.StepState{Revision: rev, Step: i} }
	for _, tc := range []struct {
		name       string
		d          *appsv1.Deployment
		inProgress bool
		want       Analysis
	}{
		{name: "no record", d: analysisDeployment("2", nil, nil, "ReplicaSetUpdated"), inProgress: true},
		{name: "a record of an earlier revision: the new one starts over",
			d: analysisDeployment("3", rec(2, run(1, "", errRate)), step(3, 1), rolloutstate.RolloutAnalysisRunning), inProgress: true},
		{name: "a step measuring holds its rollout",
			d: analysisDeployment("2", rec(2, run(1, "", errRate, restarts)), step(2, 1), rolloutstate.RolloutAnalysisRunning), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{errRate, restarts}, Runs: []HoldingRun{{Run: "step-2", Phase: rolloutstate.AnalysisRunning, Since: at(10)}}}},
		{name: "counts summed over the step's and the background run, the latest last measurement",
			d: analysisDeployment("2", rec(2, run(1, "", errRate), run(rolloutstate.BackgroundRun, "", bgErrRate)), step(2, 1), rolloutstate.RolloutAnalysisRunning), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{measured("error-rate", [4]int32{3, 1, 0, 0}, rolloutstate.MeasurementFailed, "0.2", 35)},
				Runs: []HoldingRun{{Run: "step-2", Phase: rolloutstate.AnalysisRunning, Since: at(10)}, {Run: BackgroundRunLabel, Phase: rolloutstate.AnalysisRunning, Since: at(10)}}}},
		{name: "a step the rollout has left holds nothing, its counts stay",
			d: analysisDeployment("2", rec(2, run(1, rolloutstate.AnalysisSuccessful, errRate)), step(2, 2), "ReplicaSetUpdated"), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{errRate}}},
		{name: "an inconclusive run waits for a human from its last measurement",
			d: analysisDeployment("2", rec(2, run(1, rolloutstate.AnalysisInconclusive, errRate, restarts)), step(2, 1), rolloutstate.RolloutAnalysisPaused), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{errRate, restarts}, Runs: []HoldingRun{{Run: "step-2", Phase: rolloutstate.AnalysisInconclusive, Since: at(40)}}}},
		{name: "an errored background run waits for a human",
			d: analysisDeployment("2", rec(2, run(rolloutstate.BackgroundRun, rolloutstate.AnalysisError, restarts)), step(2, 0), rolloutstate.RolloutAnalysisPaused), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{restarts}, Runs: []HoldingRun{{Run: BackgroundRunLabel, Phase: rolloutstate.AnalysisError, Since: at(40)}}}},
		{name: "an inconclusive run promoted holds nothing",
			d: analysisDeployment("2", rec(2, run(rolloutstate.BackgroundRun, rolloutstate.AnalysisInconclusive, restarts)), step(2, 2), "ReplicaSetUpdated"), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{restarts}}},
		{name: "a complete rollout's runs hold nothing",
			d:    analysisDeployment("2", rec(2, run(rolloutstate.BackgroundRun, "", errRate)), step(2, 3), rolloutstate.NewReplicaSetAvailable),
			want: Analysis{Metrics: []rolloutstate.MetricRecord{errRate}}},
		{name: "the aborted revision's measurements while its rollback runs",
			d: func() *appsv1.Deployment {
				d := analysisDeployment("3", rec(2, run(1, rolloutstate.AnalysisFailed, bgErrRate)), step(2, 1), "ReplicaSetUpdated")
				d.Annotations[rolloutstate.FailedRevisionAnnotation] = "2"
				return d
			}(), inProgress: true,
			want: Analysis{Metrics: []rolloutstate.MetricRecord{bgErrRate}}},
		{name: "a record over the controller's bound: its first 16 metrics",
			d: analysisDeployment("2", rec(2, run(1, rolloutstate.AnalysisSuccessful, manyMetrics(20)...)), step(2, 2), "ReplicaSetUpdated"), inProgress: true,
			want: Analysis{Metrics: manyMetrics(rolloutstate.MaxAnalysisMetrics)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Namespace, tc.want.Deployment = "ns", "web"
			if diff := cmp.Diff(tc.want, analysisOf(tc.d, tc.inProgress)); diff != "" {
				t.Errorf("analysisOf (-want +got):\n%s", diff)
			}
		})
	}
}

// manyMetrics returns n metric records m0, m1, … of one successful measurement each.
func manyMetrics(n int) []rolloutstate.MetricRecord {
	out := make([]rolloutstate.MetricRecord, n)
	for i := range out {
		out[i] = measured(fmt.Sprintf("m%d", i), [4]int32{1, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "1", 20)
	}
	return out
}

// EX-6: kubedeploy_analysis_last_value has a series only for a value that is a finite number.
func TestLastValue(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        float64
		ok          bool
	}{
		{name: "a Prometheus result", value: "0.004", want: 0.004, ok: true},
		{name: "an exponent", value: "1e-07", want: 1e-07, ok: true},
		{name: "a pods result", value: "ready=3 notReady=0 restarts=0 total=3"},
		{name: "NaN", value: "NaN"},
		{name: "infinite", value: "+Inf"},
		{name: "an error, no value", value: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := lastValue(measured("m", [4]int32{}, rolloutstate.MeasurementSuccessful, tc.value, 0))
			if v != tc.want || ok != tc.ok {
				t.Errorf("lastValue(%q) = %v, %v; want %v, %v", tc.value, v, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := lastValue(rolloutstate.MetricRecord{Name: "m"}); ok {
		t.Errorf("a metric never measured has a last value")
	}
}

// EX-6: a rollout held by an analysis, measuring or paused for a human, waits on rollout_step with the
// Progressing reason, as a pause step does, so KubedeployRolloutStuck (which leaves rollout_step out) never fires
// on it.
func TestAnalysisWaitsOnRolloutStep(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		want         Wait
	}{
		{name: "pause step", reason: rolloutstate.RolloutStepPaused, want: Wait{RolloutStep, rolloutstate.RolloutStepPaused}},
		{name: "analysis measuring", reason: rolloutstate.RolloutAnalysisRunning, want: Wait{RolloutStep, rolloutstate.RolloutAnalysisRunning}},
		{name: "analysis paused for a human", reason: rolloutstate.RolloutAnalysisPaused, want: Wait{RolloutStep, rolloutstate.RolloutAnalysisPaused}},
		{name: "progressing", reason: "ReplicaSetUpdated", want: Wait{Controller, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster("nginx:2")
			c.progressing(tc.reason)
			if got := waitOf(c.d, rolloutstate.PhaseProgressing, nil, nil, at(0)); got != tc.want {
				t.Errorf("waitOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// analysisSeries are the metric families of EX-6.
var analysisSeries = []string{"kubedeploy_analysis_measurements_total", "kubedeploy_analysis_last_value", "kubedeploy_analysis_run_seconds"}

// pausedAnalysisSeries are the analysis series TestAnalysisMetrics expects of its paused rollout at 100 s.
const pausedAnalysisSeries = `
# HELP kubedeploy_analysis_last_value [ALPHA] The value of the last measurement of a metric of a Deployment's analyses (EX-6), when it is a finite number (a Prometheus query's result); no series otherwise (the pods provider, an error, NaN).
# TYPE kubedeploy_analysis_last_value gauge
kubedeploy_analysis_last_value{deployment="web",metric="error-rate",namespace="ns"} 0.03
# HELP kubedeploy_analysis_measurements_total [ALPHA] Measurements of a metric of a Deployment's analyses (EX-6) by phase (Successful, Failed, Inconclusive, Error), as recorded on the Deployment (kubedeploy.io/rollout-analysis-state) for its current revision, summed over its runs; it only grows within a revision and starts over with the next revision's analyses, which rate() and increase() take as a counter reset, as after a process restart.
# TYPE kubedeploy_analysis_measurements_total counter
kubedeploy_analysis_measurements_total{deployment="web",metric="error-rate",namespace="ns",phase="Error"} 0
kubedeploy_analysis_measurements_total{deployment="web",metric="error-rate",namespace="ns",phase="Failed"} 0
kubedeploy_analysis_measurements_total{deployment="web",metric="error-rate",namespace="ns",phase="Inconclusive"} 2
kubedeploy_analysis_measurements_total{deployment="web",metric="error-rate",namespace="ns",phase="Successful"} 1
kubedeploy_analysis_measurements_total{deployment="web",metric="restarts",namespace="ns",phase="Error"} 0
kubedeploy_analysis_measurements_total{deployment="web",metric="restarts",namespace="ns",phase="Failed"} 0
kubedeploy_analysis_measurements_total{deployment="web",metric="restarts",namespace="ns",phase="Inconclusive"} 0
kubedeploy_analysis_measurements_total{deployment="web",metric="restarts",namespace="ns",phase="Successful"} 3
# HELP kubedeploy_analysis_run_seconds [ALPHA] Seconds an analysis run (EX-6) has held the rollout in progress of a Deployment, by run (step-N, background) and phase: Running, since it started; Inconclusive or Error, waiting for a human (kubedeploy rollout promote or abort), since the measurement that decided it. No series for a run that does not hold the rollout.
# TYPE kubedeploy_analysis_run_seconds gauge
kubedeploy_analysis_run_seconds{deployment="web",namespace="ns",phase="Inconclusive",run="step-2"} 60
`

// EX-6: the registered analysis metrics follow the record of the tracked Deployment's current revision: every
// phase's count per metric, the last value when a number, the run paused for a human with the time since the
// measurement that decided it; a new revision's record starts the counts over (a counter reset), and a
// forgotten Deployment's series go away.
func TestAnalysisMetrics(t *testing.T) {
	Register()
	tr := NewTracker()
	stop := Use(tr, klog.Background())
	defer stop()
	collector.now = func() time.Time { return at(100) }
	defer func() { collector.now = time.Now }()

	c := newCluster("nginx:2")
	c.rs("nginx:1", "1", at(-100))
	c.rs("nginx:2", "2", at(0))
	c.progressing(rolloutstate.RolloutAnalysisPaused)
	c.d.Annotations = analysisDeployment("2", &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{
		run(1, rolloutstate.AnalysisInconclusive,
			measured("error-rate", [4]int32{1, 0, 2, 0}, rolloutstate.MeasurementInconclusive, "0.03", 40),
			measured("restarts", [4]int32{3, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "ready=3 notReady=0 restarts=0 total=3", 30)),
	}}, &rolloutstate.StepState{Revision: 2, Step: 1}, "").Annotations
	tr.Observe(c.d, c.rss, c.pods, at(50))

	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(pausedAnalysisSeries), analysisSeries...); err != nil {
		t.Error(err)
	}

	// A new template: revision 3, whose analyses have not started; the record is still revision 2's.
	c.d.Spec.Template = template("nginx:3")
	c.rs("nginx:3", "3", at(60))
	c.d.Annotations[rolloutstate.RevisionAnnotation] = "3"
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(60))
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""), analysisSeries...); err != nil {
		t.Errorf("a new revision still reports the last one's analyses: %v", err)
	}

	c.d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] = (&rolloutstate.AnalysisRecord{Revision: 3, Runs: []rolloutstate.AnalysisRun{
		run(rolloutstate.BackgroundRun, "", measured("error-rate", [4]int32{1, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "0.001", 70))}}).Encode()
	tr.Observe(c.d, c.rss, c.pods, at(70))
	if n := counterOf(t, "error-rate", rolloutstate.MeasurementInconclusive); n != 0 {
		t.Errorf("revision 3's Inconclusive count = %v, want 0 (started over)", n)
	}
	if n := counterOf(t, "error-rate", rolloutstate.MeasurementSuccessful); n != 1 {
		t.Errorf("revision 3's Successful count = %v, want 1", n)
	}
	tr.Forget(c.d.UID)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""), analysisSeries...); err != nil {
		t.Errorf("after the Deployment was forgotten: %v", err)
	}
}

// counterOf returns kubedeploy_analysis_measurements_total{namespace="ns",deployment="web",metric,phase} as
// gathered, -1 when there is no such series.
func counterOf(t *testing.T, metric string, phase rolloutstate.MeasurementPhase) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubedeploy_analysis_measurements_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == "ns" && labels["deployment"] == "web" && labels["metric"] == metric && labels["phase"] == string(phase) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
