package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// killTemplate has two pods metrics measured 4 s apart: "ready" succeeds on every measurement (count 3), and
// "too-few" fails on every one (its condition wants more pods than there are) but only its second failure
// passes failureLimit 1 and fails the analysis.
const killTemplate = `
- name: ready
  interval: 4s
  count: 3
  successCondition: result.notReady == 0
  provider: {pods: {}}
- name: too-few
  interval: 4s
  count: 3
  failureLimit: 1
  successCondition: result.total > 100
  provider: {pods: {}}
`

// runCounts is one analysis run's record as a watch saw it: its start, phase and its metrics' counts summed.
type runCounts struct {
	since        time.Time
	phase        rolloutstate.AnalysisPhase
	ok, failed   int32
	inconclusive int32
	measuredAll  int32
}

// analysisLog records every new state of the run of step 1 of revision 2 from a watch of the Deployment.
type analysisLog struct {
	mu      sync.Mutex
	records []runCounts
}

func watchAnalysis(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) *analysisLog {
	t.Helper()
	l := &analysisLog{}
	watchDeployment(ctx, t, client, ns, name, func(d *appsv1.Deployment) {
		rec := rolloutstate.AnalysisRecordOf(d, 2)
		run := rec.Run(1)
		if run == nil {
			return
		}
		r := runCounts{since: run.Since.Time, phase: run.Phase}
		for _, m := range run.Metrics {
			r.ok, r.failed, r.inconclusive = r.ok+m.Successful, r.failed+m.Failed, r.inconclusive+m.Inconclusive
			r.measuredAll += m.Measured()
		}
		l.mu.Lock()
		if n := len(l.records); n == 0 || l.records[n-1] != r {
			l.records = append(l.records, r)
		}
		l.mu.Unlock()
	})
	return l
}

// wait returns the first record for which cond holds, waiting up to two minutes.
func (l *analysisLog) wait(t *testing.T, what string, cond func(runCounts) bool) runCounts {
	t.Helper()
	var found runCounts
	harness.Eventually(t, 2*time.Minute, what, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range l.records {
			if cond(r) {
				found = r
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// TestAnalysisContinuesAcrossKill (issue 47, EX-6): two leader-elected `kubedeploy controllers` against `up
// --controllers=`; a rollout of 10 with steps 30% → analysis (killTemplate). Once the watch sees the first
// measurements recorded (one success, one failure within failureLimit 1), the leader is killed with SIGKILL. The
// standby continues the same run: its start never changes, no count ever goes down (no recorded failure
// forgotten, no measurement taken again from scratch), the run is never Successful, and the second failure fails
// it: the rollout is aborted and rolled back.
func TestAnalysisContinuesAcrossKill(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "1s")
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	procs := []*controllersProcess{startControllers(t, dir, 0), startControllers(t, dir, 0)}
	first := waitForNewHolder(t, client, "a leader", "")
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pods-check", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: killTemplate}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.NewDeployment("default", "web", 10, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: "- setWeight: 30\n- analysis: {templates: [pods-check]}\n"}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", "web", 2*time.Minute)
	log := watchAnalysis(ctx, t, client, "default", "web")
	w := harness.WatchRollout(t, client, "default", "web", harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	harness.SetImage(ctx, t, client, "default", "web", "web", "nginx:1.9.3")

	before := log.wait(t, "the first measurements recorded", func(r runCounts) bool { return r.ok == 1 && r.failed == 1 })
	leader, _ := leaderOf(t, procs, first)
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForNewHolder(t, client, "the standby to take the Lease", first)
	end := log.wait(t, "the analysis Failed", func(r runCounts) bool { return r.phase != "" })
	checkAnalysisLog(t, log, before, end)
	harness.Eventually(t, 2*time.Minute, "the rollback to nginx:1.9", func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.9" && harness.DeploymentComplete(d) &&
			d.Annotations[rolloutstate.FailedRevisionAnnotation] == "2", nil
	})
	w.Stop()
	w.Check(1)
}

// checkAnalysisLog checks the run's records across the kill: one start, counts that never go down, never
// Successful, and the end: Failed with two measurements of each metric.
func checkAnalysisLog(t *testing.T, l *analysisLog, before, end runCounts) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := runCounts{since: before.since}
	for _, r := range l.records {
		if !r.since.Equal(before.since) || r.ok < prev.ok || r.failed < prev.failed || r.measuredAll < prev.measuredAll || r.phase == rolloutstate.AnalysisSuccessful {
			t.Errorf("record %+v after %+v: the run restarted, lost a count or succeeded", r, prev)
		}
		prev = r
	}
	// The second failure decides the run, whether or not "ready"'s second measurement was recorded before it.
	if end.phase != rolloutstate.AnalysisFailed || end.failed != 2 || end.ok < 1 || end.ok > 2 || end.measuredAll != end.ok+end.failed {
		t.Errorf("end %+v, want Failed on the second failure (the first recorded before the kill)", end)
	}
	t.Logf("records across the kill: %+v", l.records)
}

// movingTemplate is one pods metric that succeeds 8 times, 4 s apart: an analysis of 28 s.
const movingTemplate = `
- name: ready
  interval: 4s
  count: 8
  successCondition: result.notReady == 0
  provider: {pods: {}}
`

// TestShardedMoveContinuesAnalysis (issue 47, EX-6, SH-9): 3 sharded replicas, 12 namespaces whose rollouts
// (30% → analysis of movingTemplate) are measuring when a 4th replica joins and buckets move to it. In every
// namespace, moved or not, the run keeps its start, its count never goes down, and it ends Successful with
// exactly its 8 measurements; at least one namespace moved while its analysis ran; the rollouts keep their
// surge and availability bounds at every ReplicaSet change (watchRollouts).
func TestShardedMoveContinuesAnalysis(t *testing.T) {
	skipShort(t)
	r := startShardRun(t, shardOptions{namespaces: 12}, nil)
	for range 3 {
		r.startReplica()
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	r.watchRollouts()
	logs := map[string]*analysisLog{}
	for _, ns := range r.namespaces {
		logs[ns] = startMovingAnalysis(r, ns)
	}
	latest := time.Time{}
	for _, ns := range r.namespaces {
		if since := logs[ns].wait(t, ns+": the analysis started", func(rc runCounts) bool { return true }).since; since.After(latest) {
			latest = since
		}
	}
	before, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(latest.Add(5 * time.Second)))
	r.startReplica()
	r.waitSettled("after a 4th replica joined")
	after, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, ns := range r.namespaces {
		end := logs[ns].wait(t, ns+": the analysis decided", func(rc runCounts) bool { return rc.phase != "" })
		checkMovedRun(t, ns, logs[ns], end)
		if ownerOf(before, ns) != ownerOf(after, ns) {
			moved = append(moved, ns)
		}
	}
	t.Logf("namespaces that moved during their analysis: %v", moved)
	if len(moved) == 0 {
		t.Error("no namespace moved to the 4th replica during its analysis")
	}
	r.waitRolloutsComplete()
	r.checkRollouts()
}

// startMovingAnalysis creates movingTemplate in ns and starts web's rollout with its analysis step, returning
// the watch of the run.
func startMovingAnalysis(r *shardRun, ns string) *analysisLog {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pods-check", Labels: map[string]string{analysis.TemplateLabel: "true"}},
		Data: map[string]string{analysis.MetricsKey: movingTemplate}}
	if _, err := r.client.CoreV1().ConfigMaps(ns).Create(r.ctx, cm, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	l := watchAnalysis(r.ctx, r.t, r.client, ns, "web")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"- setWeight: 30\n- analysis: {templates: [pods-check]}\n"}},"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.9.3"}]}}}}`,
		rolloutstate.RolloutStepsAnnotation)
	if _, err := r.client.AppsV1().Deployments(ns).Patch(r.ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		r.t.Fatal(err)
	}
	return l
}

// checkMovedRun checks one namespace's run across the move: one start, a count that never goes down, and the
// end Successful with exactly 8 measurements.
func checkMovedRun(t *testing.T, ns string, l *analysisLog, end runCounts) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.records[0]
	prev := first
	for _, rc := range l.records {
		if !rc.since.Equal(first.since) || rc.ok < prev.ok || rc.measuredAll < prev.measuredAll {
			t.Errorf("%s: record %+v after %+v: the run restarted or lost a count", ns, rc, prev)
		}
		prev = rc
	}
	if end.phase != rolloutstate.AnalysisSuccessful || end.ok != 8 || end.measuredAll != 8 {
		t.Errorf("%s: end %+v, want Successful with exactly 8 measurements", ns, end)
	}
}
