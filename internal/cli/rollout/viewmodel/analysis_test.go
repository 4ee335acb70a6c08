package viewmodel

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// analysisTemplate is an analysis template ConfigMap of namespace ns named name, with metrics (YAML).
func analysisTemplate(name, metrics string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data:       map[string]string{analysis.MetricsKey: metrics},
	}
}

// errorRateTemplate measures an error rate 3 times, successful below 1%; restartsTemplate the new pods twice.
var (
	errorRateTemplate = analysisTemplate("error-rate", `
- name: error-rate
  interval: 30s
  count: 3
  successCondition: result < 0.01
  provider:
    prometheus:
      query: sum(rate(http_requests_total{code=~"5.."}[2m])) / sum(rate(http_requests_total[2m]))
`)
	restartsTemplate = analysisTemplate("restarts", `
- name: restarts
  interval: 10s
  count: 2
  successCondition: result.restarts == 0
  failureCondition: result.restarts > 2
  provider:
    pods: {}
`)
)

// lastAt is a metric record with counts (successful, failed, inconclusive, errors) whose last measurement had
// phase p and value v.
func lastAt(name string, counts [4]int32, p rolloutstate.MeasurementPhase, v string) rolloutstate.MetricRecord {
	return rolloutstate.MetricRecord{Name: name, Successful: counts[0], Failed: counts[1], Inconclusive: counts[2], Error: counts[3],
		Last: &rolloutstate.Measurement{Phase: p, Value: v, At: metav1.NewTime(now)}}
}

// analysisCase is the web Deployment at revision 2 mid-rollout with annotations annotations (the record rec
// when not nil) and the Progressing reason reason, and its new ReplicaSet.
func analysisCase(reason string, rec *rolloutstate.AnalysisRecord, annotations map[string]string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 4},
		appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: reason})
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	for k, v := range annotations {
		d.Annotations[k] = v
	}
	if rec != nil {
		d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation] = rec.Encode()
	}
	return d, replicaSet(d, "web-new", "2", "nginx:2", 1, 1)
}

// atAnalysisStep are the annotations of a rollout at step 2 of 3, an analysis of template error-rate.
var atAnalysisStep = map[string]string{
	rolloutstate.RolloutStepsAnnotation: "- setWeight: 25\n- analysis: {templates: [error-rate]}\n- setWeight: 50\n",
	rolloutstate.RolloutStepAnnotation:  rolloutstate.StepState{Revision: 2, Step: 1}.Encode(),
}

// withBackground is annotations with kubedeploy.io/rollout-analysis set to names.
func withBackground(annotations map[string]string, names string) map[string]string {
	out := map[string]string{rolloutstate.RolloutAnalysisAnnotation: names}
	for k, v := range annotations {
		out[k] = v
	}
	return out
}

// analysisLineCase is a case of TestAnalysisLines: the Deployment's Progressing reason, record and annotations,
// the templates the watch could read, and the lines wanted.
type analysisLineCase struct {
	name      string
	reason    string
	rec       *rolloutstate.AnalysisRecord
	ann       map[string]string
	templates []*v1.ConfigMap
	want      string
}

// analysisLineCases are TestAnalysisLines' cases.
func analysisLineCases() []analysisLineCase {
	stepRun := func(phase rolloutstate.AnalysisPhase, m ...rolloutstate.MetricRecord) rolloutstate.AnalysisRun {
		return rolloutstate.AnalysisRun{Step: 1, Phase: phase, Metrics: m}
	}
	bgRun := func(phase rolloutstate.AnalysisPhase, m ...rolloutstate.MetricRecord) rolloutstate.AnalysisRun {
		return rolloutstate.AnalysisRun{Step: rolloutstate.BackgroundRun, Phase: phase, Metrics: m}
	}
	ok2 := lastAt("error-rate", [4]int32{2, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "0.004")
	return []analysisLineCase{
		{name: "at an analysis step, measuring", reason: rolloutstate.RolloutAnalysisRunning, ann: atAnalysisStep,
			rec: &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{stepRun("", ok2)}}, templates: []*v1.ConfigMap{errorRateTemplate},
			want: `
  analysis step 2 of 3 (analysis error-rate): Running
    error-rate  0.004  Successful  2/3 ok, 0 failed, 0 inconclusive, 0 errors  (success when result < 0.01)`},
		{name: "at an analysis step not recorded yet", reason: rolloutstate.RolloutAnalysisRunning, ann: atAnalysisStep,
			rec: &rolloutstate.AnalysisRecord{Revision: 1, Runs: []rolloutstate.AnalysisRun{stepRun(rolloutstate.AnalysisSuccessful, ok2)}}, templates: []*v1.ConfigMap{errorRateTemplate},
			want: `
  analysis step 2 of 3 (analysis error-rate): starting
    error-rate  -  -  0/3 ok, 0 failed, 0 inconclusive, 0 errors  (success when result < 0.01)`},
		{name: "templates not readable (no RBAC): the record alone", reason: rolloutstate.RolloutAnalysisRunning, ann: atAnalysisStep,
			rec: &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{stepRun("", ok2)}},
			want: `
  analysis step 2 of 3 (analysis error-rate): Running
    error-rate  0.004  Successful  2 ok, 0 failed, 0 inconclusive, 0 errors`},
		{name: "background run paused for a human", reason: rolloutstate.RolloutAnalysisPaused, ann: withBackground(nil, "error-rate, restarts"),
			rec: &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{bgRun(rolloutstate.AnalysisInconclusive,
				lastAt("error-rate", [4]int32{1, 0, 2, 0}, rolloutstate.MeasurementInconclusive, "NaN"),
				lastAt("restarts", [4]int32{0, 0, 0, 5}, rolloutstate.MeasurementError, ""))}},
			templates: []*v1.ConfigMap{errorRateTemplate, restartsTemplate},
			want: `
  analysis background (analysis error-rate, restarts): Inconclusive, held until kubedeploy rollout promote deploy/web (go on) or kubedeploy rollout abort deploy/web (roll back)
    error-rate  NaN  Inconclusive  1/3 ok, 0 failed, 2 inconclusive, 0 errors  (success when result < 0.01)
    restarts    -    Error         0/2 ok, 0 failed, 0 inconclusive, 5 errors  (success when result.restarts == 0; failure when result.restarts > 2)`},
		{name: "an inconclusive run promoted no longer waits", reason: "ReplicaSetUpdated", ann: withBackground(nil, "restarts"),
			rec: &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{bgRun(rolloutstate.AnalysisInconclusive,
				lastAt("restarts", [4]int32{0, 0, 2, 0}, rolloutstate.MeasurementInconclusive, "ready=1 notReady=0 restarts=0 total=1"))}},
			want: `
  analysis background (analysis restarts): Inconclusive
    restarts  ready=1 notReady=0 restarts=0 total=1  Inconclusive  0 ok, 0 failed, 2 inconclusive, 0 errors`},
		{name: "the step's run and the background run, a failed one", reason: "ReplicaSetUpdated", ann: withBackground(atAnalysisStep, "restarts"),
			rec: &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{
				stepRun(rolloutstate.AnalysisFailed, lastAt("error-rate", [4]int32{1, 1, 0, 0}, rolloutstate.MeasurementFailed, "0.4")),
				bgRun("", lastAt("restarts", [4]int32{1, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "ready=1 notReady=0 restarts=0 total=1"))}},
			templates: []*v1.ConfigMap{analysisTemplate("error-rate", "not: a list")},
			want: `
  analysis step 2 of 3 (analysis error-rate): Failed: the rollout is aborted
    error-rate  0.4  Failed  1 ok, 1 failed, 0 inconclusive, 0 errors
  analysis background (analysis restarts): Running
    restarts  ready=1 notReady=0 restarts=0 total=1  Successful  1 ok, 0 failed, 0 inconclusive, 0 errors`},
		{name: "a step that is not an analysis, no background: nothing", reason: "ReplicaSetUpdated",
			ann: map[string]string{rolloutstate.RolloutStepsAnnotation: "- setWeight: 25\n- pause: {}\n", rolloutstate.RolloutStepAnnotation: rolloutstate.StepState{Revision: 2, Step: 1}.Encode()}},
	}
}

// EX-6 in `rollout watch`: the analysis step's run and the background run, each metric's last value, phase and
// counts, with the template's count and conditions when the watch can read it and without them when it cannot
// (no error); a run paused for a human names the commands that end the wait.
func TestAnalysisLines(t *testing.T) {
	for _, tc := range analysisLineCases() {
		t.Run(tc.name, func(t *testing.T) {
			d, newRS := analysisCase(tc.reason, tc.rec, tc.ann)
			var b strings.Builder
			analysisOf(d, newRS, rolloutstate.PhaseProgressing, tc.templates).lines(&b, d.Name)
			if got := b.String(); got != tc.want {
				t.Errorf("lines:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// EX-6: the watch's lines show the analyses after the ReplicaSets and before the why-lines while the rollout is in
// progress, and none once it is complete.
func TestAnalysisInLines(t *testing.T) {
	rec := &rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{{Step: rolloutstate.BackgroundRun,
		Metrics: []rolloutstate.MetricRecord{lastAt("error-rate", [4]int32{1, 0, 0, 0}, rolloutstate.MeasurementSuccessful, "0.001")}}}}
	d, newRS := analysisCase(rolloutstate.RolloutAnalysisRunning, rec, withBackground(nil, "error-rate"))
	in := Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, replicaSet(d, "web-old", "1", "nginx:1", 3, 3)},
		Pods: []*v1.Pod{pod(newRS, "web-new-a", "ImagePullBackOff", "")}, AnalysisTemplates: []*v1.ConfigMap{errorRateTemplate}}
	lines := Build(in, now).Lines(true)
	old := strings.Index(lines, "old web-old:")
	run := strings.Index(lines, "\n  analysis background (analysis error-rate): Running\n    error-rate  0.001  Successful  1/3 ok,")
	why := strings.Index(lines, "why: 1 ImagePullBackOff")
	if old < 0 || run < old || why < run {
		t.Errorf("want the ReplicaSets, the analysis, then the why-lines:\n%s", lines)
	}

	d.Status.Conditions[0].Reason = rolloutstate.NewReplicaSetAvailable
	d.Status.UpdatedReplicas, d.Status.Replicas = 4, 4
	newRS.Spec.Replicas, newRS.Status.Replicas, newRS.Status.AvailableReplicas = ptr.To[int32](4), 4, 4
	in.ReplicaSets = in.ReplicaSets[:1]
	if m := Build(in, now); m.Phase != rolloutstate.PhaseComplete || m.Analysis != nil || strings.Contains(m.Lines(true), "analysis") {
		t.Errorf("a complete rollout (phase %s) shows its analyses:\n%s", m.Phase, m.Lines(true))
	}
}

// EX-6: the watch reads the analysis templates only for a Deployment whose rollouts may run analyses.
func TestUsesAnalysis(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want bool
	}{
		{name: "no policy"},
		{name: "steps without analysis", ann: map[string]string{rolloutstate.RolloutStepsAnnotation: "- setWeight: 25\n- pause: {}\n"}},
		{name: "steps that do not decode", ann: map[string]string{rolloutstate.RolloutStepsAnnotation: "analysis: ["}},
		{name: "an analysis step", ann: atAnalysisStep, want: true},
		{name: "a background analysis", ann: withBackground(nil, "error-rate"), want: true},
		{name: "an empty background analysis", ann: withBackground(nil, " , ")},
		{name: "a record", ann: map[string]string{rolloutstate.RolloutAnalysisStateAnnotation: "{}"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := analysisCase("ReplicaSetUpdated", nil, tc.ann)
			if got := UsesAnalysis(d); got != tc.want {
				t.Errorf("UsesAnalysis = %v, want %v", got, tc.want)
			}
		})
	}
}
