package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
	"github.com/kubedeploy/kubedeploy/internal/testing/promserver"
)

// upSteps are issue 47's: 30% → pause 10 s → analysis → 100%.
const upSteps = "- setWeight: 30\n- pause: {duration: 10s}\n- analysis: {templates: [error-rate]}\n"

// upErrorRate is issue 47's metric; upErrorsOnly has no fallback: for a version that never failed its result is
// empty.
const (
	upErrorRate  = promserver.ErrorRateMetric
	upErrorsOnly = promserver.ErrorsOnlyMetric
)

// upAnalysis is one `kubedeploy up --prometheus-url` with its client and Prometheus.
type upAnalysis struct {
	dir    string
	client kubernetes.Interface
	prom   *promserver.Server
	exp    *promserver.Exporter
	hashes *hashIndex
}

// TestUpAnalysisAgainstPrometheus is issue 47's first "Done when" on the `kubedeploy up` binary (its own
// controllers, `--prometheus-url`) and a real Prometheus scraping an exporter whose 5xx share follows each
// ReplicaSet's image (tag "bad": 40%, others 0%); steps 30% → pause 10 s → analysis (3 × 2 s) → 100%. A good
// image completes; a bad one is aborted by the analysis within initialDelay + (failureLimit+1) × interval + 10 s
// of its start and rolled back, its ReplicaSet never above 3 pods; an empty result is Inconclusive and holds;
// with Prometheus stopped a good image stays at 30% (Error, RolloutAnalysisPaused) and, with Prometheus back at
// its address, `kubedeploy rollout promote` completes it. The rolling-update bounds are checked at every change.
func TestUpAnalysisAgainstPrometheus(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	u := &upAnalysis{dir: t.TempDir(), exp: promserver.NewExporter(t)}
	u.prom = promserver.Run(ctx, t, promserver.Config{Targets: []string{u.exp.Target()}})
	startUp(t, "--data-dir", u.dir, "--api-port", "0", "--pod-startup-delay", "1s", "--prometheus-url", u.prom.URL)
	u.client = clientFor(t, u.dir)
	u.hashes = serveReplicaSets(t, u.client, u.exp, 0.4)
	t.Run("parallel", func(t *testing.T) {
		t.Run("good", func(t *testing.T) { t.Parallel(); u.good(ctx, t) })
		t.Run("bad", func(t *testing.T) { t.Parallel(); u.bad(ctx, t) })
		t.Run("empty", func(t *testing.T) { t.Parallel(); u.empty(ctx, t) })
	})
	t.Run("PrometheusDown", func(t *testing.T) { u.prometheusDown(ctx, t) })
}

// deploy creates namespace ns with the template ConfigMap and web (10 × nginx:1, upSteps), waits for its first
// rollout, starts the bounds and size watches, and sets web's image.
func (u *upAnalysis) deploy(ctx context.Context, t *testing.T, ns, template, image string) (*harness.RolloutWatch, *harness.SizeLog) {
	t.Helper()
	if _, err := u.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: template}}
	if _, err := u.client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.NewDeployment(ns, "web", 10, "nginx:1")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: upSteps}
	if _, err := u.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, u.client, ns, "web", 2*time.Minute)
	rw := harness.WatchRollout(t, u.client, ns, "web", harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	sizes := harness.WatchReplicaSetSizes(ctx, t, u.client, ns)
	harness.SetImage(ctx, t, u.client, ns, "web", "web", image)
	return rw, sizes
}

// decided waits up to two minutes for ns/web's analysis step run of revision 2 to have a phase, and returns
// the Deployment and the run.
func (u *upAnalysis) decided(t *testing.T, ns string) (*appsv1.Deployment, *rolloutstate.AnalysisRun) {
	t.Helper()
	var d *appsv1.Deployment
	var run *rolloutstate.AnalysisRun
	harness.Eventually(t, 2*time.Minute, ns+": the analysis decided", func(ctx context.Context) (bool, error) {
		var err error
		if d, err = u.client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			return false, err
		}
		rec := rolloutstate.AnalysisRecordOf(d, 2)
		run = rec.Run(2)
		return run != nil && run.Phase != "", nil
	})
	return d, run
}

func (u *upAnalysis) good(ctx context.Context, t *testing.T) {
	rw, sizes := u.deploy(ctx, t, "good", upErrorRate, "nginx:2")
	_, run := u.decided(t, "good")
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisSuccessful || m.Successful != 3 {
		t.Fatalf("run %+v, metric %+v; want Successful 3 of 3", run, m)
	}
	harness.WaitComplete(t, u.client, "good", "web", 2*time.Minute)
	rw.Stop()
	rw.Check(1)
	t.Logf("good: Successful 3/3, complete; new ReplicaSet sizes %v", sizes.Of(u.hashes.find(t, "good", "nginx:2").Name))
}

func (u *upAnalysis) bad(ctx context.Context, t *testing.T) {
	rw, sizes := u.deploy(ctx, t, "bad", upErrorRate, "nginx:bad")
	_, run := u.decided(t, "bad")
	last := run.Metric("error-rate").Last
	if run.Phase != rolloutstate.AnalysisFailed || last == nil {
		t.Fatalf("run %+v; want Failed", run)
	}
	waitImage(t, u.client, "bad", "nginx:1")
	late := last.At.Sub(run.Since.Time)
	t.Logf("bad: Failed on %s, %.1f s after the analysis started (bound 12 s); rolled back", last.Value, late.Seconds())
	if late > 12*time.Second {
		t.Errorf("the failing measurement came %s after the analysis started, past 12 s", late)
	}
	rw.Stop()
	rw.Check(1)
	for _, n := range sizes.Of(u.hashes.find(t, "bad", "nginx:bad").Name) {
		if n > 3 {
			t.Errorf("the bad ReplicaSet reached %d pods, above the step's 3", n)
		}
	}
}

func (u *upAnalysis) empty(ctx context.Context, t *testing.T) {
	u.deploy(ctx, t, "empty", upErrorsOnly, "nginx:2")
	d, run := u.decided(t, "empty")
	if run.Phase != rolloutstate.AnalysisInconclusive || run.Metric("error-rate").Inconclusive != 1 {
		t.Fatalf("run %+v; want Inconclusive on an empty result", run)
	}
	if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused || d.Status.UpdatedReplicas != 3 {
		t.Errorf("Progressing %+v with %d updated; want %s at 3", c, d.Status.UpdatedReplicas, rolloutstate.RolloutAnalysisPaused)
	}
}

// prometheusDown stops Prometheus once the rollout is at its pause step: the analysis's measurements are
// Errors and the rollout holds at 3 pods; Prometheus starts again at the same address and `kubedeploy rollout
// promote` (the binary) completes the rollout.
func (u *upAnalysis) prometheusDown(ctx context.Context, t *testing.T) {
	rw, _ := u.deploy(ctx, t, "down", upErrorRate, "nginx:3")
	harness.Eventually(t, 2*time.Minute, "the pause step", func(ctx context.Context) (bool, error) {
		d, err := u.client.AppsV1().Deployments("down").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, ok := rolloutstate.StepStateOf(d)
		return ok && st.Revision == 2 && st.Step == 1, nil
	})
	addr := u.prom.Address()
	u.prom.Stop()
	d, run := u.decided(t, "down")
	c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	if m := run.Metric("error-rate"); run.Phase != rolloutstate.AnalysisError || m.Measured() != 0 || c == nil ||
		c.Reason != rolloutstate.RolloutAnalysisPaused || d.Status.UpdatedReplicas != 3 {
		t.Fatalf("run %+v, metric %+v, Progressing %+v, %d updated; want Error, nothing measured, %s at 3",
			run, m, c, d.Status.UpdatedReplicas, rolloutstate.RolloutAnalysisPaused)
	}
	u.prom = promserver.Run(ctx, t, promserver.Config{Targets: []string{u.exp.Target()}, Address: addr})
	out, err := exec.CommandContext(ctx, binary, "rollout", "promote", "deploy/web", "-n", "down",
		"--kubeconfig", filepath.Join(u.dir, "kubeconfig")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "promoted") {
		t.Fatalf("kubedeploy rollout promote: %v\n%s", err, out)
	}
	t.Logf("down: Error after %d errors, held at 3 pods; %s", run.Metric("error-rate").Error, strings.TrimSpace(string(out)))
	harness.WaitComplete(t, u.client, "down", "web", 2*time.Minute)
	rw.Stop()
	rw.Check(1)
}
