package rollout

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// analysisPausedBy returns d with its Progressing reason set to RolloutAnalysisPaused (EX-6).
func analysisPausedBy(d *appsv1.Deployment) *appsv1.Deployment {
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutAnalysisPaused}}
	return d
}

// EX-6: promote goes on at an analysis step (its run, measuring or paused) and, while an analysis paused the
// rollout for a human, at whatever step it is (the background run's); a setWeight step is still refused
// without one.
func TestPromoteAnalysis(t *testing.T) {
	analysisStep := stepsDeployment(1)
	analysisStep.Annotations[rolloutstate.RolloutStepsAnnotation] = "- setWeight: 20\n- analysis: {templates: [error-rate]}\n- setWeight: 50\n"
	for _, tc := range []struct {
		name  string
		d     *appsv1.Deployment
		value string
		said  string
	}{
		{name: "background analysis paused at a setWeight step", d: analysisPausedBy(stepsDeployment(2)), value: "3/2",
			said: "promoted: revision 3 goes on past the analysis that paused it (at step 3 of 4, setWeight 50)"},
		{name: "background analysis paused at a pause step", d: analysisPausedBy(stepsDeployment(3)), value: "3/3",
			said: "promoted: step 4 of 4 (pause until promoted) of revision 3 ends"},
		{name: "background analysis paused after every step", d: analysisPausedBy(stepsDeployment(4)), value: "3/4",
			said: "promoted: revision 3 goes on past the analysis that paused it (every step done)"},
		{name: "setWeight step, no analysis paused", d: stepsDeployment(2)},
		{name: "analysis step measuring", d: analysisStep, value: "3/1",
			said: "promoted: step 2 of 3 (analysis error-rate) of revision 3 ends"},
		{name: "analysis step paused", d: analysisPausedBy(analysisStep.DeepCopy()), value: "3/1",
			said: "promoted: step 2 of 3 (analysis error-rate) of revision 3 ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value, said, err := promote(tc.d, 3, false)
			if tc.value == "" {
				if err == nil || !strings.Contains(err.Error(), "is not a pause or an analysis") {
					t.Errorf("promote: %q, %q, %v; want refused", value, said, err)
				}
				return
			}
			if err != nil || value != tc.value || said != tc.said {
				t.Errorf("promote: %q, %q, %v; want %q, %q", value, said, err, tc.value, tc.said)
			}
		})
	}
}

// EX-6 in the terminal view: a rollout an analysis paused for a human shows the run with its metrics and the
// commands, keeps the view open and offers p, f and a as a pause step does; a writes the abort of the revision.
func TestTerminalViewAtAPausedAnalysis(t *testing.T) {
	objs := rolloutObjects(appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutAnalysisPaused})
	d := objs[0].(*appsv1.Deployment)
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Annotations = map[string]string{
		rolloutstate.RevisionAnnotation:        "2",
		rolloutstate.RolloutStepsAnnotation:    "- setWeight: 50\n- pause: {duration: 1h}\n",
		rolloutstate.RolloutStepAnnotation:     rolloutstate.StepState{Revision: 2, Step: 0}.Encode(),
		rolloutstate.RolloutAnalysisAnnotation: "error-rate",
		rolloutstate.RolloutAnalysisStateAnnotation: rolloutstate.AnalysisRecord{Revision: 2, Runs: []rolloutstate.AnalysisRun{{
			Step: rolloutstate.BackgroundRun, Phase: rolloutstate.AnalysisError,
			Metrics: []rolloutstate.MetricRecord{{Name: "error-rate", Error: 5, ConsecutiveError: 5, Last: &rolloutstate.Measurement{Phase: rolloutstate.MeasurementError}}},
		}}}.Encode(),
	}
	client := fake.NewClientset(objs...)
	m := viewmodel.Build(inputOf(objs, 3), time.Now())
	tm := teatest.NewTestModel(t, newTUIModel(m, &stepKeys{ctx: context.Background(), client: client, ns: "ns", name: "web"}), teatest.WithInitialTermSize(200, 40))
	tm.Send(modelMsg{m: m})
	wants := []string{
		"analysis background (analysis error-rate): Error, held until kubedeploy rollout promote deploy/web (go on) or kubedeploy rollout abort deploy/web (roll back)",
		"error-rate  -  Error  0 ok, 0 failed, 0 inconclusive, 5 errors",
		"p: promote  f: promote --full  a: abort  q: stop watching",
	}
	var screen string
	waitScreen(t, tm, &screen, wants...)
	tm.Type("a")
	waitScreen(t, tm, &screen, "abort of revision 2 requested")
	got, err := client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || got.Annotations[rolloutstate.RolloutAbortAnnotation] != "2" {
		t.Errorf("after a: %v, annotations %v", err, got.Annotations)
	}
	tm.Type("q")
	if final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(tuiModel); !final.stopped {
		t.Errorf("q does not stop the view")
	}
}

// EX-6: the watch reads the analysis templates only for a Deployment that may run analyses, and when it may not
// list them (no RBAC on configmaps) it says so and goes on without them, never failing.
func TestAnalysisTemplatesShown(t *testing.T) {
	for _, tc := range []struct {
		name       string
		background string
		forbidden  bool
		want       bool
		said       string
	}{
		{name: "no analysis", want: false},
		{name: "analysis, templates readable", background: "error-rate", want: true},
		{name: "analysis, no RBAC on configmaps", background: "error-rate", forbidden: true, want: false,
			said: "Not showing the analysis metrics' counts and conditions: listing analysis templates: configmaps is forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := rolloutObjects(progressingCondition)[0].(*appsv1.Deployment)
			if tc.background != "" {
				d.Annotations = map[string]string{rolloutstate.RolloutAnalysisAnnotation: tc.background}
			}
			client := fake.NewClientset()
			var lists int
			client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				lists++
				if tc.forbidden {
					return true, nil, apierrors.NewForbidden(v1.Resource("configmaps"), "", nil)
				}
				return false, nil, nil
			})
			var errOut bytes.Buffer
			if got := analysisTemplatesShown(context.Background(), client, d, &errOut); got != tc.want || !strings.Contains(errOut.String(), tc.said) {
				t.Errorf("shown %v, said %q; want %v, %q", got, errOut.String(), tc.want, tc.said)
			}
			if tc.background == "" && lists != 0 {
				t.Errorf("listed configmaps for a Deployment without analyses")
			}
		})
	}
}
