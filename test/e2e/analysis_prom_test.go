package e2e

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
	"github.com/kubedeploy/kubedeploy/internal/testing/promserver"
)

// promMovingTemplate is issue 47's error-rate metric over a longer run: 15 measurements 4 s apart (about a
// minute), the first 4 s after the analysis started (the new pods' series are in Prometheus by then).
const promMovingTemplate = `
- name: error-rate
  initialDelay: 4s
  interval: 4s
  count: 15
  successCondition: result < 0.05
  provider:
    prometheus:
      query: |
        (sum(rate(http_requests_total{code="500",pod_template_hash="{{ .NewPodTemplateHash }}"}[5s])) or vector(0))
        / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[5s]))
`

// promVerdicts is what the test turns each namespace's new version into once the 4th replica has joined.
type promVerdicts struct {
	bad, empty []string // 40% 5xx from then on; no series from then on
}

// TestShardedMoveAgainstPrometheus (issue 47's "Done when" for sharded mode, EX-6, SH-9): `up` with 3 sharded
// `kubedeploy controllers --prometheus-url` replicas and a real Prometheus scraping an exporter that plays
// every ReplicaSet's traffic. 12 namespaces roll out 30% → analysis (promMovingTemplate); while every run
// measures, a 4th replica joins and buckets move to it. Then, in namespaces that moved and in ones that did
// not, the new version turns bad (40% 5xx) or its series vanish (an empty result). Every run keeps its start
// and never loses a count across the move; the good ones end Successful with exactly 15 measurements and
// complete; the bad ones end Failed with their earlier successes kept and are rolled back, their new
// ReplicaSet never above the step's pods; the empty ones end Inconclusive and hold (RolloutAnalysisPaused). The
// rolling-update bounds hold at every event.
func TestShardedMoveAgainstPrometheus(t *testing.T) {
	skipShort(t)
	r := startShardRun(t, shardOptions{namespaces: 12}, nil)
	exp := promserver.NewExporter(t)
	prom := promserver.Run(r.ctx, t, promserver.Config{Targets: []string{exp.Target()}})
	hashes := serveReplicaSets(t, r.client, exp, 0)
	for range 3 {
		r.startReplica("--prometheus-url=" + prom.URL)
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	r.watchRollouts()
	logs, sizes := map[string]*analysisLog{}, map[string]*harness.SizeLog{}
	for _, ns := range r.namespaces {
		sizes[ns] = harness.WatchReplicaSetSizes(r.ctx, t, r.client, ns)
		logs[ns] = startPromAnalysis(r, ns)
	}
	latest := time.Time{}
	for _, ns := range r.namespaces {
		if since := logs[ns].wait(t, ns+": the analysis started", func(runCounts) bool { return true }).since; since.After(latest) {
			latest = since
		}
	}
	before, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(latest.Add(5 * time.Second)))
	r.startReplica("--prometheus-url=" + prom.URL)
	r.waitSettled("after a 4th replica joined")
	after, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var moved, stayed []string
	for _, ns := range r.namespaces {
		if ownerOf(before, ns) != ownerOf(after, ns) {
			moved = append(moved, ns)
		} else {
			stayed = append(stayed, ns)
		}
	}
	v := turnVersions(t, exp, hashes, moved, stayed)
	t.Logf("moved during their analysis: %v; turned bad: %v; turned empty: %v", moved, v.bad, v.empty)
	if len(moved) == 0 {
		t.Error("no namespace moved to the 4th replica during its analysis")
	}
	for _, ns := range r.namespaces {
		end := logs[ns].wait(t, ns+": the analysis decided", func(rc runCounts) bool { return rc.phase != "" })
		checkPromRun(t, r, ns, logs[ns], end, v, sizes[ns].Of(hashes.find(t, ns, "nginx:1.9.3").Name))
	}
	r.checkRollouts()
}

// turnVersions turns, right away, the new versions of namespaces bad and empty, and returns which: a moved one
// and two that stayed bad, a moved one and one that stayed empty, a second moved one bad (moved ones first, as
// many as there are).
func turnVersions(t *testing.T, exp *promserver.Exporter, hashes *hashIndex, moved, stayed []string) promVerdicts {
	t.Helper()
	var v promVerdicts
	take := func(list *[]string, n int) []string {
		n = min(n, len(*list))
		out := slices.Clone((*list)[:n]) // a copy: appending to it must not write into list
		*list = (*list)[n:]
		return out
	}
	m, s := slices.Clone(moved), slices.Clone(stayed)
	v.bad = append(take(&m, 1), take(&s, 2)...)
	v.empty = append(take(&m, 1), take(&s, 1)...)
	v.bad = append(v.bad, take(&m, 1)...)
	for _, ns := range v.bad {
		exp.SetErrorRate(hashes.of(t, ns, "nginx:1.9.3"), 0.4)
	}
	for _, ns := range v.empty {
		exp.Forget(hashes.of(t, ns, "nginx:1.9.3"))
	}
	return v
}

// checkPromRun checks one namespace's run across the move (one start, no count ever lower) and its end by
// what v turned its version into; sizes are its new ReplicaSet's sizes as a watch saw them.
func checkPromRun(t *testing.T, r *shardRun, ns string, l *analysisLog, end runCounts, v promVerdicts, sizes []int32) {
	t.Helper()
	l.mu.Lock()
	first, prev := l.records[0], l.records[0]
	for _, rc := range l.records {
		if !rc.since.Equal(first.since) || rc.ok < prev.ok || rc.measuredAll < prev.measuredAll {
			t.Errorf("%s: record %+v after %+v: the run restarted or lost a count", ns, rc, prev)
		}
		prev = rc
	}
	l.mu.Unlock()
	t.Logf("%s: %s after %d measurements (%d successful, %d failed, %d inconclusive)", ns, end.phase, end.measuredAll, end.ok, end.failed, end.inconclusive)
	stepPods := rolloutstate.StepPods(30, shardReplicasPerDeployment)
	switch {
	case slices.Contains(v.bad, ns):
		if end.phase != rolloutstate.AnalysisFailed || end.failed != 1 || end.ok < 1 {
			t.Errorf("%s turned bad: end %+v, want Failed on one failure, the successes before it kept", ns, end)
		}
		waitImage(t, r.client, ns, "nginx:1.9")
	case slices.Contains(v.empty, ns):
		if end.phase != rolloutstate.AnalysisInconclusive || end.inconclusive != 1 {
			t.Errorf("%s turned empty: end %+v, want Inconclusive", ns, end)
		}
		d, err := r.client.AppsV1().Deployments(ns).Get(r.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != rolloutstate.RolloutAnalysisPaused {
			t.Errorf("%s turned empty: Progressing %+v, want %s", ns, c, rolloutstate.RolloutAnalysisPaused)
		}
	default:
		if end.phase != rolloutstate.AnalysisSuccessful || end.ok != 15 || end.measuredAll != 15 {
			t.Errorf("%s: end %+v, want Successful with exactly 15 measurements", ns, end)
		}
		harness.WaitComplete(t, r.client, ns, "web", 2*time.Minute)
		return
	}
	for _, n := range sizes {
		if n > stepPods {
			t.Errorf("%s: the new ReplicaSet reached %d pods, above the step's %d", ns, n, stepPods)
		}
	}
}

// startPromAnalysis creates promMovingTemplate in ns and starts web's rollout to nginx:1.9.3 with 30% → its
// analysis, returning the watch of the run.
func startPromAnalysis(r *shardRun, ns string) *analysisLog {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: promMovingTemplate}}
	if _, err := r.client.CoreV1().ConfigMaps(ns).Create(r.ctx, cm, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	l := watchAnalysis(r.ctx, r.t, r.client, ns, "web")
	// The template names its namespace, so that every namespace's new version has a pod-template-hash (the
	// exporter's and the query's key) of its own: the same template would hash the same in every namespace.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"- setWeight: 30\n- analysis: {templates: [error-rate]}\n"}},`+
		`"spec":{"template":{"metadata":{"annotations":{"e2e.kubedeploy.io/namespace":%q}},"spec":{"containers":[{"name":"web","image":"nginx:1.9.3"}]}}}}`,
		rolloutstate.RolloutStepsAnnotation, ns)
	if _, err := r.client.AppsV1().Deployments(ns).Patch(r.ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		r.t.Fatal(err)
	}
	return l
}

// hashIndex is the ReplicaSets serveReplicaSets has seen: namespace and image to pod-template-hash and name.
type hashIndex struct {
	store cache.Store
}

// of returns the pod-template-hash of ns's ReplicaSet of image, waiting for it.
func (h *hashIndex) of(t *testing.T, ns, image string) string {
	t.Helper()
	return h.find(t, ns, image).Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}

func (h *hashIndex) find(t *testing.T, ns, image string) *appsv1.ReplicaSet {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, obj := range h.store.List() {
			if rs := obj.(*appsv1.ReplicaSet); rs.Namespace == ns && rs.Spec.Template.Spec.Containers[0].Image == image {
				return rs
			}
		}
	}
	t.Fatalf("no ReplicaSet of %s in %s within a minute", image, ns)
	return nil
}

// serveReplicaSets makes exp serve traffic for every ReplicaSet's pod-template-hash as it appears, badRate of it
// 5xx for an image tagged "bad", none for the others, and returns the index of them.
func serveReplicaSets(t *testing.T, client kubernetes.Interface, exp *promserver.Exporter, badRate float64) *hashIndex {
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Apps().V1().ReplicaSets().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		rs, rate := obj.(*appsv1.ReplicaSet), 0.0
		if strings.HasSuffix(rs.Spec.Template.Spec.Containers[0].Image, ":bad") {
			rate = badRate
		}
		exp.SetErrorRate(rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], rate)
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return &hashIndex{store: inf.GetStore()}
}

// waitImage waits up to two minutes for ns/web to be back on image and complete.
func waitImage(t *testing.T, client kubernetes.Interface, ns, image string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, ns+": rolled back to "+image+", complete", func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == image && harness.DeploymentComplete(d), nil
	})
}
