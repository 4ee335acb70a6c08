package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// stepPause is the pause of stepsResumeSteps' timed pauses.
const stepPause = 30 * time.Second

// stepsResumeSteps: 20% → pause 30 s → 50% → pause 30 s → 100%.
const stepsResumeSteps = "- setWeight: 20\n- pause: {duration: 30s}\n- setWeight: 50\n- pause: {duration: 30s}\n"

// stepRecord is a RolloutStepAnnotation value as a watch of the Deployment saw it, and when.
type stepRecord struct {
	at    time.Time
	state rolloutstate.StepState
}

// stepLog records every new RolloutStepAnnotation value of one Deployment from a watch.
type stepLog struct {
	mu      sync.Mutex
	records []stepRecord
}

func watchSteps(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) *stepLog {
	t.Helper()
	l := &stepLog{}
	watchDeployment(ctx, t, client, ns, name, func(d *appsv1.Deployment) {
		st, ok := rolloutstate.StepStateOf(d)
		if !ok {
			return
		}
		l.mu.Lock()
		if n := len(l.records); n == 0 || l.records[n-1].state != st {
			l.records = append(l.records, stepRecord{at: time.Now(), state: st})
		}
		l.mu.Unlock()
	})
	return l
}

// watchDeployment calls seen, from one goroutine, with every version of Deployment ns/name a watch delivers
// until ctx ends or t's cleanup stops it.
func watchDeployment(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, seen func(*appsv1.Deployment)) {
	t.Helper()
	w, err := client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				seen(d)
			}
		}
	}()
}

// first waits up to two minutes for the first record of step (0-based) of revision and returns it.
func (l *stepLog) first(t *testing.T, revision int64, step int) stepRecord {
	t.Helper()
	var found stepRecord
	harness.Eventually(t, 2*time.Minute, "rollout step "+strconv.Itoa(step+1), func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range l.records {
			if r.state.Revision == revision && r.state.Step == step {
				found = r
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// steps returns the steps recorded for revision, in order.
func (l *stepLog) steps(revision int64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, r := range l.records {
		if r.state.Revision == revision {
			out = append(out, r.state.Step)
		}
	}
	return out
}

// checkResumed checks that the pause step that started as pause, of length stepPause, ended on time: the next
// step's recorded start is the pause's start + stepPause exactly, and the watch saw it no later than 3 s after
// that (the new owner waited the remaining time, not a whole pause from its start, and did not end it early).
func checkResumed(t *testing.T, what string, pause, next stepRecord, stepPause time.Duration) {
	t.Helper()
	due := pause.state.Since.Add(stepPause)
	if !next.state.Since.Time.Equal(due) {
		t.Errorf("%s: step %d started at %v, want the pause's end %v", what, next.state.Step+1, next.state.Since, due)
	}
	if late := next.at.Sub(due); late < -time.Second || late > 3*time.Second {
		t.Errorf("%s: step %d seen %.1fs after the pause was due to end (want within ±3 s; -1 s for the clocks)", what, next.state.Step+1, late.Seconds())
	} else {
		t.Logf("%s: step %d seen %.1fs after the pause was due to end", what, next.state.Step+1, late.Seconds())
	}
}

// TestRolloutStepsResumeAcrossKillAndHandover (issue 46): two leader-elected `kubedeploy controllers` against
// `up --controllers=`; a Deployment of 10 with steps 20% → pause 30 s → 50% → pause 30 s. kill -9 of the
// leader 10 s into the first pause: the standby takes over and ends the pause when it was due (± 3 s), not
// 30 s after taking over; SIGTERM of that leader (a handover to a third process) 10 s into the second pause:
// the same. Every step is recorded in order, none skipped, and the rollout completes.
func TestRolloutStepsResumeAcrossKillAndHandover(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "1s")
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	procs := []*controllersProcess{startControllers(t, dir, 0), startControllers(t, dir, 0)}
	first := waitForNewHolder(t, client, "a leader", "")
	d := harness.NewDeployment("default", "web", 10, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: stepsResumeSteps}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", "web", 2*time.Minute)
	steps := watchSteps(ctx, t, client, "default", "web")
	w := harness.WatchRollout(t, client, "default", "web", harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	harness.SetImage(ctx, t, client, "default", "web", "web", "nginx:1.9.3")

	pause := steps.first(t, 2, 1)
	time.Sleep(time.Until(pause.state.Since.Add(10 * time.Second)))
	leader, standby := leaderOf(t, procs, first)
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := waitForNewHolder(t, client, "the standby to take the Lease", first)
	checkResumed(t, "after kill -9", pause, steps.first(t, 2, 2), stepPause)

	pause = steps.first(t, 2, 3)
	third := startControllers(t, dir, 0)
	harness.Eventually(t, time.Minute, "the third process to stand by", func(context.Context) (bool, error) {
		return bytes.Contains(third.out.Bytes(), []byte(`"Observed leader"`)), nil
	})
	time.Sleep(time.Until(pause.state.Since.Add(10 * time.Second)))
	if err := standby.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitForNewHolder(t, client, "the third process to take the Lease", second)
	checkResumed(t, "after the handover", pause, steps.first(t, 2, 4), stepPause)

	harness.WaitComplete(t, client, "default", "web", 2*time.Minute)
	w.Stop()
	w.Check(4)
	if got := steps.steps(2); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("steps recorded for revision 2: %v, want 0 1 2 3 4 in order", got)
	}
}

// TestShardedMoveResumesRolloutSteps (issue 46): 3 sharded replicas, 12 namespaces with a Deployment each whose
// rollout has the steps 20% → pause 40 s; 10 s into the pauses a 4th replica joins and buckets move to it. In
// every namespace, moved or not, the pause ends when it was due (± 3 s) and no step is skipped; at least one
// namespace moved while paused.
func TestShardedMoveResumesRolloutSteps(t *testing.T) {
	skipShort(t)
	const pauseFor = 40 * time.Second
	r := startShardRun(t, shardOptions{namespaces: 12}, nil)
	for range 3 {
		r.startReplica()
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	logs := map[string]*stepLog{}
	for _, ns := range r.namespaces {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"- setWeight: 20\n- pause: {duration: 40s}\n"}},"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.9.3"}]}}}}`,
			rolloutstate.RolloutStepsAnnotation)
		logs[ns] = watchSteps(r.ctx, t, r.client, ns, "web")
		if _, err := r.client.AppsV1().Deployments(ns).Patch(r.ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pauses := map[string]stepRecord{}
	latest := time.Time{}
	for _, ns := range r.namespaces {
		pauses[ns] = logs[ns].first(t, 2, 1)
		if since := pauses[ns].state.Since.Time; since.After(latest) {
			latest = since
		}
	}
	before, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(latest.Add(10 * time.Second)))
	r.startReplica()
	r.waitSettled("after a 4th replica joined")
	after, err := r.ring(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, ns := range r.namespaces {
		checkResumed(t, ns, pauses[ns], logs[ns].first(t, 2, 2), pauseFor)
		if got := logs[ns].steps(2); !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("%s: steps recorded for revision 2: %v, want 0 1 2 in order", ns, got)
		}
		if ownerOf(before, ns) != ownerOf(after, ns) {
			moved = append(moved, ns)
		}
	}
	t.Logf("namespaces that moved during their pause: %v", moved)
	if len(moved) == 0 {
		t.Error("no namespace moved to the 4th replica during its pause")
	}
	r.waitRolloutsComplete()
}

// ownerOf returns the owner of the bucket holding namespace ns in ring.
func ownerOf(ring shard.Ring, ns string) string {
	for _, b := range ring.Buckets {
		if b.Range().Contains(ns) {
			return b.Owner
		}
	}
	return ""
}
