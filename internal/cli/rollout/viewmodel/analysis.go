package viewmodel

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Analysis is what `rollout watch` shows of the analyses (EX-6) of the rollout in progress, from the record the
// Deployment controller keeps on the Deployment (rolloutstate.RolloutAnalysisStateAnnotation): the run of the
// analysis step the rollout is at and the background run, each metric's last measurement and counts.
type Analysis struct {
	// Runs are the analysis step's run (when the rollout is at one), then the background run (when the
	// Deployment has kubedeploy.io/rollout-analysis).
	Runs []AnalysisRun
	// Paused is set while an analysis holds the rollout for a human (Progressing reason RolloutAnalysisPaused):
	// `kubedeploy rollout promote` goes on, `kubedeploy rollout abort` rolls back.
	Paused bool
}

// AnalysisRun is one analysis run as the view shows it.
type AnalysisRun struct {
	// What names the run: "step 3 of 4 (analysis error-rate)", "background (analysis error-rate, latency)".
	What string
	// Started is set once the controller recorded the run; Phase is its recorded verdict, AnalysisRunning while
	// it measures.
	Started bool
	Phase   rolloutstate.AnalysisPhase
	// Metrics are its metrics: those of its templates the watch could read, in order, then any other the
	// record holds.
	Metrics []AnalysisMetric
}

// AnalysisMetric is one metric of a run: its recorded measurements (counts, last) and, when the watch could
// read its template, its definition (count, conditions).
type AnalysisMetric struct {
	rolloutstate.MetricRecord
	// Definition is the metric in its template (analysis.ParseTemplate); nil when the watch cannot read the
	// template (no RBAC on ConfigMaps, not found, not valid).
	Definition *analysis.Metric
}

// UsesAnalysis reports whether d's rollouts may run analyses (EX-6): it has kubedeploy.io/rollout-analysis, an
// analysis step in its kubedeploy.io/rollout-steps, or an analysis record. `rollout watch` then reads the
// namespace's analysis templates, when it may, for the metrics' conditions.
func UsesAnalysis(d *appsv1.Deployment) bool {
	if _, ok := d.Annotations[rolloutstate.RolloutAnalysisStateAnnotation]; ok || len(backgroundTemplates(d)) > 0 {
		return true
	}
	for _, s := range stepsOf(d) {
		if s.Analysis != nil {
			return true
		}
	}
	return false
}

// stepsOf returns d's valid rollout steps (rolloutstate.StepsOf, the controller's judgement), nil when it has
// none or they are invalid (the controller then runs no analysis).
func stepsOf(d *appsv1.Deployment) rolloutstate.Steps {
	steps, _ := rolloutstate.StepsOf(d)
	return steps
}

// backgroundTemplates returns the template names of d's kubedeploy.io/rollout-analysis ("NAME[,NAME]"), nil
// without one.
func backgroundTemplates(d *appsv1.Deployment) []string {
	var names []string
	for _, n := range strings.Split(d.Annotations[rolloutstate.RolloutAnalysisAnnotation], ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// analysisOf returns the analyses of d's rollout to newRS (nil: none shown) while it is in progress (phase),
// their metrics' definitions read from templates (ConfigMaps; nil: none readable).
func analysisOf(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, phase rolloutstate.Phase, templates []*v1.ConfigMap) *Analysis {
	if newRS == nil || phase == rolloutstate.PhaseComplete || phase == rolloutstate.PhaseRolledBack {
		return nil
	}
	revision, err := strconv.ParseInt(newRS.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if err != nil {
		return nil
	}
	rec := rolloutstate.AnalysisRecordOf(d, revision)
	defs := definitions(templates)
	a := &Analysis{}
	steps := stepsOf(d)
	if st, ok := rolloutstate.StepStateOf(d); ok && st.Revision == revision {
		var step *rolloutstate.StepAnalysis
		if st.Step < len(steps) {
			step = steps[st.Step].Analysis
		}
		if run := rec.Run(st.Step); step != nil || run != nil {
			what := fmt.Sprintf("step %d of %d", st.Step+1, len(steps))
			a.Runs = append(a.Runs, runOf(what, step, run, defs))
		}
	}
	bg := backgroundTemplates(d)
	if run := rec.Run(rolloutstate.BackgroundRun); len(bg) > 0 || run != nil {
		a.Runs = append(a.Runs, runOf("background", &rolloutstate.StepAnalysis{Templates: bg}, run, defs))
	}
	if len(a.Runs) == 0 {
		return nil
	}
	progressing := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	a.Paused = progressing != nil && progressing.Reason == rolloutstate.RolloutAnalysisPaused
	return a
}

// definitions returns the metrics of the templates that parse (analysis.ParseTemplate), by ConfigMap name.
func definitions(templates []*v1.ConfigMap) map[string][]analysis.Metric {
	out := map[string][]analysis.Metric{}
	for _, cm := range templates {
		if metrics, err := analysis.ParseTemplate(cm); err == nil {
			out[cm.Name] = metrics
		}
	}
	return out
}

// runOf is the view of run (nil: not recorded yet) of the analysis a (nil: its templates unknown), called what.
func runOf(what string, a *rolloutstate.StepAnalysis, run *rolloutstate.AnalysisRun, defs map[string][]analysis.Metric) AnalysisRun {
	r := AnalysisRun{What: what, Phase: rolloutstate.AnalysisRunning}
	if a != nil && len(a.Templates) > 0 {
		r.What += " (" + a.String() + ")"
	}
	recorded := map[string]*rolloutstate.MetricRecord{}
	if run != nil {
		r.Started = true
		if run.Phase != "" {
			r.Phase = run.Phase
		}
		for i := range run.Metrics {
			recorded[run.Metrics[i].Name] = &run.Metrics[i]
		}
	}
	shown := map[string]bool{}
	if a != nil {
		for _, t := range a.Templates {
			for _, m := range defs[t] {
				am := AnalysisMetric{MetricRecord: rolloutstate.MetricRecord{Name: m.Name}, Definition: &m}
				if rec := recorded[m.Name]; rec != nil {
					am.MetricRecord = *rec
				}
				r.Metrics = append(r.Metrics, am)
				shown[m.Name] = true
			}
		}
	}
	if run != nil {
		for _, m := range run.Metrics {
			if !shown[m.Name] {
				r.Metrics = append(r.Metrics, AnalysisMetric{MetricRecord: m})
			}
		}
	}
	return r
}

// WaitsForHuman reports whether r holds the rollout for a human now: it ended Inconclusive or Error and the
// Deployment says an analysis paused it (paused: Analysis.Paused).
func (r AnalysisRun) WaitsForHuman(paused bool) bool {
	return paused && (r.Phase == rolloutstate.AnalysisInconclusive || r.Phase == rolloutstate.AnalysisError)
}

// Header is r's first line for Deployment name: "analysis step 3 of 4 (analysis error-rate): Running"; before
// the controller recorded it, "…: starting"; while it waits for a human (paused: Analysis.Paused), the commands
// that end the wait, as a pause step's message gives them (EX-5).
func (r AnalysisRun) Header(name string, paused bool) string {
	line := "analysis " + r.What + ": "
	switch {
	case !r.Started:
		return line + "starting"
	case r.WaitsForHuman(paused):
		return line + fmt.Sprintf("%s, held until kubedeploy rollout promote deploy/%s (go on) or kubedeploy rollout abort deploy/%s (roll back)",
			r.Phase, name, name)
	case r.Phase == rolloutstate.AnalysisFailed:
		return line + "Failed: the rollout is aborted"
	}
	return line + string(r.Phase)
}

// MetricLines are r's metrics, one line each in r.Metrics' order, in aligned columns: the name, the last
// measurement's value and phase ("-" before the first, or without a value), the counts ("2/3 ok" when the
// template is known: 2 successful of its count 3), and the template's conditions when known:
// "error-rate  0.004  Successful  2/3 ok, 0 failed, 0 inconclusive, 0 errors  (success when result < 0.01)".
func (r AnalysisRun) MetricLines() []string {
	cols := make([][3]string, len(r.Metrics))
	var width [3]int
	for i, m := range r.Metrics {
		cols[i] = [3]string{m.Name, "-", "-"}
		if m.Last != nil {
			cols[i][2] = string(m.Last.Phase)
			if m.Last.Value != "" {
				cols[i][1] = m.Last.Value
			}
		}
		for c := range cols[i] {
			width[c] = max(width[c], len(cols[i][c]))
		}
	}
	lines := make([]string, len(r.Metrics))
	for i, m := range r.Metrics {
		lines[i] = fmt.Sprintf("%-*s  %-*s  %-*s  %s", width[0], cols[i][0], width[1], cols[i][1], width[2], cols[i][2], m.counts())
		if c := m.conditions(); c != "" {
			lines[i] += "  (" + c + ")"
		}
	}
	return lines
}

// counts is "2/3 ok, 0 failed, 0 inconclusive, 0 errors" ("2 ok, …" without the definition's count).
func (m AnalysisMetric) counts() string {
	ok := strconv.Itoa(int(m.Successful))
	if m.Definition != nil {
		ok += "/" + strconv.Itoa(int(m.Definition.Settings().Count))
	}
	return fmt.Sprintf("%s ok, %d failed, %d inconclusive, %d errors", ok, m.Failed, m.Inconclusive, m.Error)
}

// conditions is "success when result < 0.01; failure when result > 0.05" from the definition, "" without one.
func (m AnalysisMetric) conditions() string {
	if m.Definition == nil {
		return ""
	}
	var parts []string
	for _, c := range []struct{ name, expr string }{{"success", m.Definition.SuccessCondition}, {"failure", m.Definition.FailureCondition}} {
		if expr := strings.Join(strings.Fields(c.expr), " "); expr != "" {
			parts = append(parts, c.name+" when "+expr)
		}
	}
	return strings.Join(parts, "; ")
}

// lines writes a's lines into b for Deployment name, each after a newline: a run's header indented 2, its
// metrics 4.
func (a *Analysis) lines(b *strings.Builder, name string) {
	if a == nil {
		return
	}
	for _, r := range a.Runs {
		fmt.Fprintf(b, "\n  %s", r.Header(name, a.Paused))
		for _, l := range r.MetricLines() {
			fmt.Fprintf(b, "\n    %s", l)
		}
	}
}
