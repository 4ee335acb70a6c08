package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// terminationKills is how many times TestTerminationCompleteSurvivesKill9
// kills the controllers (issue 7 asks for 20).
const terminationKills = 20

// TestTerminationCompleteSurvivesKill9 is IM-7 / EX-3 end to end: a
// 50-replica Deployment (maxSurge 25% = 13, so at most 63 pods) annotated
// kubedeploy.io/pod-replacement-policy: TerminationComplete is rolled out
// again and again while `kubedeploy controllers` is killed with SIGKILL 20
// times at random moments and restarted at once (no leader election, so no
// Lease to wait for). Pods take 2s to terminate. Counted at every pod change
// by a client of its own, live + terminating pods never exceed 63, and the
// ReplicaSets stay within the surge and availability bounds. At the end
// nothing spurious was written (issue 7): one ReplicaSet and revision per
// template, and a last kill and restart of the controllers once everything
// settled writes neither the Deployment nor its ReplicaSets.
func TestTerminationCompleteSurvivesKill9(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "500ms", "--pod-termination-delay", "2s")
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	d := harness.NewDeployment("default", "web", 50, "nginx:1.9")
	d.Annotations = map[string]string{rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
	d.Spec.RevisionHistoryLimit = ptr.To(int32(terminationKills + 1)) // every ReplicaSet is kept, so a lost one shows
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proc := startUnelectedControllers(t, dir)
	harness.WaitComplete(t, client, "default", "web", 3*time.Minute)
	pods := harness.WatchPods(t, client, "default", labels.SelectorFromSet(d.Spec.Selector.MatchLabels))
	rollouts := harness.WatchRollout(t, client, "default", "web", harness.Bounds{MaxTotal: 63, MinAvailable: 38})
	images := 0
	for kill := range terminationKills {
		if done, err := complete(ctx, client); err != nil || done {
			images++
			harness.SetImage(ctx, t, client, "default", "web", "web", fmt.Sprintf("nginx:1.9-%d", images))
		}
		time.Sleep(time.Duration(300+rng.IntN(1700)) * time.Millisecond)
		if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		<-proc.exited
		proc.exited <- nil
		proc = startUnelectedControllers(t, dir)
	}
	done := harness.WaitComplete(t, client, "default", "web", 3*time.Minute)
	rollouts.Stop()
	rollouts.Check(10)
	_, _, maxPresent, changes := pods.Window()
	t.Logf("%d kill -9s over %d rollouts: at most %d live + terminating pods (bound 63), %d pod changes seen", terminationKills, images, maxPresent, changes)
	if maxPresent > 63 {
		t.Errorf("%d live + terminating pods, above replicas + maxSurge = 63 (%s)", maxPresent, pods)
	}

	// Nothing spurious: one ReplicaSet and revision per template, and a
	// kill of the settled Deployment's controllers followed by a restart
	// writes neither it nor its ReplicaSets.
	checkOneRevisionPerTemplate(ctx, t, client, done, images+1)
	checkControllersKillWritesNothing(ctx, t, client, dir, proc, done)
}

// checkControllersKillWritesNothing waits for done and its ReplicaSets to
// settle, kills proc with SIGKILL, starts unelected controllers on dir's
// cluster again, and checks that they wrote neither done nor its ReplicaSets.
func checkControllersKillWritesNothing(ctx context.Context, t *testing.T, client kubernetes.Interface, dir string, proc *controllersProcess, done *appsv1.Deployment) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the Deployment and its ReplicaSets to settle", func(ctx context.Context) (bool, error) {
		return settled(ctx, client, done)
	})
	versions := resourceVersions(ctx, t, client, done)
	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-proc.exited
	proc.exited <- err
	startUnelectedControllers(t, dir)
	barrier(ctx, t, client)
	checkUnchanged(ctx, t, client, done, versions)
}

// startUnelectedControllers runs `kubedeploy controllers` without leader
// election (one process at a time), so a restart acts at once.
func startUnelectedControllers(t *testing.T, dataDir string) *controllersProcess {
	t.Helper()
	return startControllersWith(t, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"), "--secure-port", "0", "--leader-elect=false")
}

// complete reports whether Deployment default/web has finished its rollout.
func complete(ctx context.Context, client kubernetes.Interface) (bool, error) {
	d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return harness.DeploymentComplete(d), nil
}
