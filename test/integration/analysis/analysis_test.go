package analysis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
	"github.com/kubedeploy/kubedeploy/internal/testing/promserver"
)

const (
	replicas = 10
	// steps are issue 47's: 30% → pause 10 s → analysis → 100%.
	steps = "- setWeight: 30\n- pause: {duration: 10s}\n- analysis: {templates: [error-rate]}\n"
	// analysisStep is the analysis step's index (0-based), as rollout promote names it.
	analysisStep = 2
	// stepPods is setWeight 30 of 10 replicas.
	stepPods = 3
	timeout  = 2 * time.Minute
	// badRate is the share of 5xx the exporter serves for a ReplicaSet whose image tag is "bad".
	badRate = 0.4
)

// errorRate and errorsOnly are issue 47's template and its variant without a fallback (empty for a version that
// never failed).
const (
	errorRate  = promserver.ErrorRateMetric
	errorsOnly = promserver.ErrorsOnlyMetric
)

// world is the Prometheus, the exporter that plays the pods' traffic and the controllers pointed at them.
type world struct {
	exp  *promserver.Exporter
	prom *promserver.Server
}

func newWorld(ctx context.Context, t *testing.T) *world {
	harness.Skip(t, env)
	w := &world{exp: promserver.NewExporter(t)}
	w.prom = promserver.Run(ctx, t, promserver.Config{Targets: []string{w.exp.Target()}})
	stop := env.RunControllers(manager.Config{Prometheus: analysis.Prometheus{DefaultAddress: w.prom.URL}})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	w.followReplicaSets(ctx, t)
	return w
}

// followReplicaSets makes the exporter serve traffic for every ReplicaSet's pod-template-hash as it appears:
// badRate 5xx for an image tagged "bad", none for the others.
func (w *world) followReplicaSets(ctx context.Context, t *testing.T) {
	factory := informers.NewSharedInformerFactory(env.Client, 0)
	inf := factory.Apps().V1().ReplicaSets().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		rs := obj.(*appsv1.ReplicaSet)
		rate := 0.0
		if strings.HasSuffix(rs.Spec.Template.Spec.Containers[0].Image, ":bad") {
			rate = badRate
		}
		w.exp.SetErrorRate(rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], rate)
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() }) // not ctx: it ends after this cleanup runs
}

// deploy creates the template ConfigMap and Deployment web (10 replicas of nginx:1, steps) in a new namespace,
// waits for its first rollout, and returns the namespace and a watch of the rolling-update bounds (maxSurge 3,
// maxUnavailable 2 of 25%) and of the ReplicaSets' sizes.
func deploy(ctx context.Context, t *testing.T, template string) (string, *harness.RolloutWatch, *harness.SizeLog) {
	return deployWith(ctx, t, template, map[string]string{rolloutstate.RolloutStepsAnnotation: steps})
}

// deployWith is deploy with annotations in place of issue 47's steps.
func deployWith(ctx context.Context, t *testing.T, template string, annotations map[string]string) (string, *harness.RolloutWatch, *harness.SizeLog) {
	ns := env.Namespace(t)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: template}}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.NewDeployment(ns, "web", replicas, "nginx:1")
	d.Annotations = annotations
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", timeout)
	rw := harness.WatchRollout(t, env.Client, ns, "web", harness.Bounds{MaxTotal: replicas + 3, MinAvailable: replicas - 2})
	return ns, rw, harness.WatchReplicaSetSizes(ctx, t, env.Client, ns)
}

// newReplicaSet waits for the ReplicaSet of ns/web's current template and returns its name.
func newReplicaSet(t *testing.T, ns, image string) string {
	var name string
	harness.Eventually(t, timeout, "the ReplicaSet of "+image, func(ctx context.Context) (bool, error) {
		list, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rs := range list.Items {
			if rs.Spec.Template.Spec.Containers[0].Image == image {
				name = rs.Name
				return true, nil
			}
		}
		return false, nil
	})
	return name
}

// record waits until ns/web records a run of the analysis step of revision 2 for which done holds, and
// returns the Deployment and that run.
func record(t *testing.T, ns, what string, done func(run *rolloutstate.AnalysisRun) bool) (*appsv1.Deployment, *rolloutstate.AnalysisRun) {
	var d *appsv1.Deployment
	var run *rolloutstate.AnalysisRun
	harness.Eventually(t, timeout, what, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			return false, err
		}
		rec := rolloutstate.AnalysisRecordOf(d, 2)
		run = rec.Run(analysisStep)
		return run != nil && done(run), nil
	})
	return d, run
}

// maxSize returns the largest spec.replicas the size log saw of ReplicaSet name.
func maxSize(l *harness.SizeLog, name string) int32 {
	sizes := l.Of(name)
	if len(sizes) == 0 {
		return 0
	}
	return slices.Max(sizes)
}

// progressing returns d's Progressing condition (zero when it has none).
func progressing(d *appsv1.Deployment) appsv1.DeploymentCondition {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c
		}
	}
	return appsv1.DeploymentCondition{}
}

// events returns the messages of ns/web's events with reason.
func events(ctx context.Context, t *testing.T, ns, reason string) []string {
	list, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Name == "web" {
			out = append(out, e.Message)
		}
	}
	return out
}

// promote writes what `kubedeploy rollout promote` writes for the analysis step of revision 2.
func promote(ctx context.Context, t *testing.T, ns string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(2, analysisStep, false))
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkBounds stops the bounds watch and fails t on any change that broke them.
func checkBounds(rw *harness.RolloutWatch) {
	rw.Stop()
	rw.Check(1)
}
