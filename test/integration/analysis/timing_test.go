package analysis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

const (
	// timingCount and timingInterval are the measurements of BenchmarkAnalysisMeasurementTiming's metric.
	timingCount    = 5
	timingInterval = 2 * time.Second
)

var timingTemplate = fmt.Sprintf(`
- name: ready
  interval: %s
  count: %d
  successCondition: result.notReady == 0
  provider: {pods: {}}
`, timingInterval, timingCount)

// BenchmarkAnalysisMeasurementTiming measures how late each analysis measurement is recorded against its
// schedule (issue 47: "each measurement within 1 s of its interval on an idle up"): per iteration, one rollout of
// 10 replicas through 30% → an analysis of 5 pods measurements 2 s apart, on the embedded control plane with the
// controllers alone on it. A measurement k (0-based) is due at the run's start + k × interval; its lateness is
// when an independent watch of the Deployment saw it recorded minus that, so it includes taking the measurement,
// the record's write and the watch's delivery. Reported: max-late-ms and mean-late-ms over every measurement.
//
//	go test -run '^$' -bench BenchmarkAnalysisMeasurementTiming -benchtime 3x ./test/integration/analysis/
func BenchmarkAnalysisMeasurementTiming(b *testing.B) {
	if env == nil {
		b.Skip("integration environment not started (-short)")
	}
	stop := env.RunControllers(manager.Config{})
	defer func() { _ = stop() }()
	var late []time.Duration
	for i := 0; i < b.N; i++ {
		late = append(late, timedRollout(b, i)...)
	}
	var sum time.Duration
	for _, l := range late {
		sum += l
	}
	b.ReportMetric(float64(slices.Max(late).Milliseconds()), "max-late-ms")
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(late)), "mean-late-ms")
	b.Logf("%d measurements, lateness %v", len(late), late)
}

// timedRollout runs one rollout with the timing analysis in its own namespace and returns each measurement's
// lateness.
func timedRollout(b *testing.B, i int) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("timing-%d-%d", time.Now().Unix(), i)
	must(b, createNamespace(ctx, ns))
	defer func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ready", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: timingTemplate}}
	_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	must(b, err)
	d := harness.NewDeployment(ns, "web", replicas, "nginx:1")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: "- setWeight: 30\n- analysis: {templates: [ready]}\n"}
	_, err = env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	must(b, err)
	must(b, waitFor(ctx, ns, func(d *appsv1.Deployment) bool { return harness.DeploymentComplete(d) }))
	seen := watchMeasured(ctx, b, ns)
	_, err = env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}`), metav1.PatchOptions{})
	must(b, err)
	res := <-seen
	must(b, res.err)
	late := make([]time.Duration, len(res.at))
	for k, at := range res.at {
		late[k] = at.Sub(res.since.Add(time.Duration(k) * timingInterval))
	}
	return late
}

// measured is what watchMeasured saw: the run's start and when each measurement was seen recorded.
type measured struct {
	since time.Time
	at    []time.Time
	err   error
}

// watchMeasured watches ns/web and sends, once timingCount measurements are seen, when each was first seen.
func watchMeasured(ctx context.Context, b *testing.B, ns string) <-chan measured {
	w, err := env.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web"})
	must(b, err)
	out := make(chan measured, 1)
	go func() {
		defer w.Stop()
		var m measured
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			rec := rolloutstate.AnalysisRecordOf(d, 2)
			run := rec.Run(1)
			if run == nil {
				continue
			}
			m.since = run.Since.Time
			for n := int(run.Metric("ready").Measured()); len(m.at) < n; {
				m.at = append(m.at, time.Now())
			}
			if len(m.at) >= timingCount {
				out <- m
				return
			}
		}
		m.err = fmt.Errorf("the watch ended after %d measurements: %v", len(m.at), ctx.Err())
		out <- m
	}()
	return out
}

func createNamespace(ctx context.Context, ns string) error {
	_, err := env.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// waitFor polls ns/web until cond holds.
func waitFor(ctx context.Context, ns string, cond func(*appsv1.Deployment) bool) error {
	for {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err == nil && cond(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ns %s: %w", ns, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
