package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The tests in this file check `kubedeploy rollout plan` (issue 11) against
// the real controllers: the plan is made from the live Deployment, then the
// change is applied, and the new ReplicaSet's sizes the controllers write
// must be the plan's, in order.

// plan runs `rollout plan deploy/NAME --image IMAGE -o json` against the
// shared cluster, with the harness's pod startup delay.
func plan(ctx context.Context, t *testing.T, ns, name string, args ...string) deployment.Plan {
	t.Helper()
	cmd := rollout.NewCommand(rollout.Options{})
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"plan", "deploy/" + name, "-n", ns, "-o", "json",
		"--kubeconfig", env.ControlPlane.KubeconfigPath(), "--pod-startup", "0.2"}, args...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("rollout plan: %v\n%s", err, errOut.String())
	}
	var p deployment.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("rollout plan -o json: %v\n%s", err, out.String())
	}
	return p
}

// sizeLog records, from a watch, each ReplicaSet's spec.replicas every time
// it changes (a ReplicaSet that appears is recorded at its first size).
type sizeLog struct {
	mu    sync.Mutex
	sizes map[string][]int32
	stop  func()
}

func watchSizes(ctx context.Context, t *testing.T, ns string) *sizeLog {
	t.Helper()
	w, err := env.Client.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &sizeLog{sizes: map[string][]int32{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			l.mu.Lock()
			s := l.sizes[rs.Name]
			if n := specOf(rs); len(s) == 0 || s[len(s)-1] != n {
				l.sizes[rs.Name] = append(s, n)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *sizeLog) of(name string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes[name])
}

// subsequence reports whether every element of want appears in got, in order.
func subsequence(want, got []int32) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// match says how the controllers' sizes must compare with the plan's.
type match int

const (
	// exactly: the same sizes in the same order, for both ReplicaSets.
	exactly match = iota
	// refined: the new ReplicaSet passes through every planned size in order
	// and its first sizes (the steps the change itself causes, before any
	// pod is ready) are the planned ones; in between the controllers may take
	// more, smaller steps, because the pods of one planned step turn
	// available over a spread of time, not at one instant: the ReplicaSet
	// controller reports those that turn Ready within 250 ms of the first
	// together, but here the scheduler alone spreads a step's pods over
	// about as much (on a busy 2-core machine).
	refined
)

// checkPlan plans the image change of a complete Deployment d, applies it
// with set image while watching the bounds (when given) on every
// ReplicaSet change, and compares the sizes the controllers write with the
// plan's.
func checkPlan(t *testing.T, d *appsv1.Deployment, bounds harness.Bounds, m match) {
	ns := d.Namespace
	ctx := harness.Context(t, 3*time.Minute)
	d = createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	oldRS := harness.OwnedReplicaSets(ctx, t, env.Client, d)[0].Name
	p := plan(ctx, t, ns, d.Name, "--image", d.Name+"=nginx:1.9.3")
	if !p.Complete || p.NewReplicaSet == "" || len(p.OldReplicaSets) != 1 || p.OldReplicaSets[0] != oldRS {
		t.Fatalf("plan: %+v", p)
	}
	if bounds.MaxTotal != 0 && (p.PeakPods != bounds.MaxTotal || p.MinAvailable != bounds.MinAvailable) {
		t.Errorf("plan peak %d, min available %d; the strategy allows %d and %d", p.PeakPods, p.MinAvailable, bounds.MaxTotal, bounds.MinAvailable)
	}
	sizes := watchSizes(ctx, t, ns)
	defer sizes.stop()
	var w *harness.RolloutWatch
	if bounds.MaxTotal != 0 {
		w = harness.WatchRollout(t, env.Client, ns, d.Name, bounds)
	}
	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	waitRevision(t, ns, d.Name, "2")
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	harness.Eventually(t, 30*time.Second, "the old ReplicaSet at 0 in the watch", func(context.Context) (bool, error) {
		s := sizes.of(oldRS)
		return len(s) > 0 && s[len(s)-1] == 0, nil
	})
	if w != nil {
		w.Stop()
		w.Check(len(p.Steps))
	}
	gotNew, wantNew := sizes.of(p.NewReplicaSet), p.NewReplicaSetSizes()
	// The watch starts at the old ReplicaSet's current size.
	gotOld, wantOld := sizes.of(oldRS), append([]int32{*d.Spec.Replicas}, p.OldReplicaSetSizes(0)...)
	t.Logf("new ReplicaSet %s: controllers %v, plan %v; old %s: controllers %v, plan %v; plan ~%gs",
		p.NewReplicaSet, gotNew, wantNew, oldRS, gotOld, wantOld, p.EstimatedSeconds)
	switch m {
	case exactly:
		if !slices.Equal(gotNew, wantNew) || !slices.Equal(gotOld, wantOld) {
			t.Errorf("the controllers' sizes differ from the plan's")
		}
	case refined:
		first := wantNew[:2]
		if !subsequence(wantNew, gotNew) || len(gotNew) < 2 || !slices.Equal(gotNew[:2], first) {
			t.Errorf("the new ReplicaSet's sizes do not refine the plan's")
		}
		if gotOld[len(gotOld)-1] != 0 || gotOld[1] != wantOld[1] {
			t.Errorf("the old ReplicaSet's first step or end differ from the plan's")
		}
	}
}

// Issue 11 Done-when, the seed Deployment: 20 replicas, 25%/25%. The plan is
// new 5 → 10 at once, then 20 when those 10 are available; the controllers
// start the same way and then move in the smaller steps partial availability
// allows, never past the bounds (the plan's peak and minimum). On a quiet
// `kubedeploy up` they take exactly the planned steps (see the README).
func TestPlanMatchesRollingSeed(t *testing.T) {
	ns := env.Namespace(t)
	checkPlan(t, harness.NewDeployment(ns, "nginx-deployment", 20, "nginx:1.9"), harness.Bounds{MaxTotal: 25, MinAvailable: 15}, refined)
}

// Issue 11 Done-when, seed 004's one-by-one case: maxSurge 0, maxUnavailable 1.
func TestPlanMatchesOneByOne(t *testing.T) {
	ns := env.Namespace(t)
	checkPlan(t, withStrategy(harness.NewDeployment(ns, "nginx", 3, "nginx:1.9"), 0, 1), harness.Bounds{MaxTotal: 3, MinAvailable: 2}, exactly)
}

// Issue 11 Done-when, Recreate: old to 0, then new to full size (RC-2..RC-5).
func TestPlanMatchesRecreate(t *testing.T) {
	ns := env.Namespace(t)
	checkPlan(t, recreate(harness.NewDeployment(ns, "nginx", 10, "nginx:1.9")), harness.Bounds{}, exactly)
}

// A plan never writes: the Deployment and its ReplicaSets keep their
// resourceVersions.
func TestPlanWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx", 4, "nginx:1.9"))
	d = harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	before := fmt.Sprint(d.ResourceVersion, harness.OwnedReplicaSets(ctx, t, env.Client, d)[0].ResourceVersion)
	plan(ctx, t, ns, d.Name, "--image", "nginx=nginx:1.9.3")
	after, err := env.Client.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(after.ResourceVersion, harness.OwnedReplicaSets(ctx, t, env.Client, after)[0].ResourceVersion); got != before {
		t.Errorf("resourceVersions %s → %s after a plan", before, got)
	}
}

// -f with a changed manifest: the API server defaults it in a dry run, so a
// manifest equal to the live spec plans no rollout and one with a new image
// plans the same rollout as --image.
func TestPlanFromManifest(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	d := createDeployment(ctx, t, harness.NewDeployment(ns, "nginx", 8, "nginx:1.9"))
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)
	manifest := func(image string) string {
		m := harness.NewDeployment(ns, "nginx", 8, image)
		m.APIVersion, m.Kind = "apps/v1", "Deployment"
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "d.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	same := plan(ctx, t, ns, d.Name, "-f", manifest("nginx:1.9"))
	if !same.Complete || len(same.Steps) != 0 {
		t.Errorf("unchanged manifest: %+v", same)
	}
	fromFile := plan(ctx, t, ns, d.Name, "-f", manifest("nginx:1.9.3"))
	fromFlag := plan(ctx, t, ns, d.Name, "--image", "nginx=nginx:1.9.3")
	if fromFile.NewReplicaSet != fromFlag.NewReplicaSet || !slices.Equal(fromFile.NewReplicaSetSizes(), fromFlag.NewReplicaSetSizes()) {
		t.Errorf("-f plan %+v differs from --image plan %+v", fromFile, fromFlag)
	}
}

// watchOut runs `rollout watch deploy/NAME` against the shared cluster and
// returns its output and error once it ends.
func watchOut(ctx context.Context, ns, name string, args ...string) (string, error) {
	cmd := rollout.NewCommand(rollout.Options{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"watch", "deploy/" + name, "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// Issue 11: `rollout watch` follows a good rollout to completion (exit 0)
// and, on an nginx:broken rollout, names every stuck pod of the new
// ReplicaSet under ImagePullBackOff and fails at the progress deadline.
func TestWatchGoodAndStuckRollouts(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	d := harness.NewDeployment(ns, "web", 4, "nginx:1.9")
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](4)
	d = createDeployment(ctx, t, d)
	harness.WaitComplete(t, env.Client, ns, d.Name, rolloutTimeout)

	setImage(ctx, t, ns, d.Name, d.Name, "nginx:1.9.3")
	out, err := watchOut(ctx, ns, d.Name, "--timeout", "1m")
	if err != nil || !strings.Contains(out, `deployment "web" successfully rolled out`) {
		t.Fatalf("good rollout: %v\n%s", err, out)
	}

	setImage(ctx, t, ns, d.Name, d.Name, "nginx:broken")
	out, err = watchOut(ctx, ns, d.Name, "--timeout", "1m")
	if err == nil || !strings.Contains(err.Error(), "exceeded its progress deadline") {
		t.Fatalf("broken rollout: error %v\n%s", err, out)
	}
	newRS, ok := replicaSetsByRevision(ctx, t, d)["3"]
	if !ok {
		t.Fatal("no ReplicaSet at revision 3")
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stuck := 0
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == newRS.UID {
			stuck++
			if !strings.Contains(out, p.Name) {
				t.Errorf("stuck pod %s not named:\n%s", p.Name, out)
			}
		}
	}
	if want := fmt.Sprintf("why: %d ImagePullBackOff: ", stuck); stuck == 0 || !strings.Contains(out, want) {
		t.Errorf("want %q (%d stuck pods) in:\n%s", want, stuck, out)
	}
	if !strings.Contains(out, `(container web: Back-off pulling image "nginx:broken")`) {
		t.Errorf("no container message in:\n%s", out)
	}
	t.Logf("watch output:\n%s", out)
}
