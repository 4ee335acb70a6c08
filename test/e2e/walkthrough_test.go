package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// kubectl runs `kubedeploy kubectl args…` against dataDir's cluster (through
// KUBEDEPLOY_DATA_DIR, as a user would) and returns its combined output and error.
func kubectl(t *testing.T, dataDir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"kubectl"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBEDEPLOY_DATA_DIR="+dataDir, "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustKubectl is kubectl that fails the test on error and checks that the
// output contains every string in want.
func mustKubectl(t *testing.T, dataDir string, want []string, args ...string) string {
	t.Helper()
	out, err := kubectl(t, dataDir, args...)
	if err != nil {
		t.Fatalf("kubedeploy kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("kubedeploy kubectl %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}

// checkScalingSequence creates Deployment name (image nginx:1.9, replicas,
// the default 25%/25% strategy) with `kubectl create deployment`, sets its
// image to nginx:1.9.3 and checks that `describe` lists every event in want
// (formats taking the old and the new ReplicaSet name).
func checkScalingSequence(t *testing.T, dataDir, name, replicas string, want []string) {
	t.Helper()
	d := "deploy/" + name
	mustKubectl(t, dataDir, []string{"created"}, "create", "deployment", name, "--image=nginx:1.9", "--replicas="+replicas)
	mustKubectl(t, dataDir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	oldRS := rsWithImage(t, dataDir, name, "nginx:1.9")
	mustKubectl(t, dataDir, []string{"image updated"}, "set", "image", d, "nginx=nginx:1.9.3")
	mustKubectl(t, dataDir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	newRS := rsWithImage(t, dataDir, name, "nginx:1.9.3")
	var events []string
	for _, w := range want {
		events = append(events, fmt.Sprintf(w, oldRS, newRS))
	}
	mustKubectl(t, dataDir, events, "describe", d)
}

// rsWithImage returns the name of the ReplicaSet labelled app=app whose pod template runs image.
func rsWithImage(t *testing.T, dataDir, app, image string) string {
	t.Helper()
	out := mustKubectl(t, dataDir, nil, "get", "rs", "-l", "app="+app, "-o",
		`jsonpath={range .items[?(@.spec.template.spec.containers[0].image=="`+image+`")]}{.metadata.name}{end}`)
	name := strings.TrimSpace(out)
	if name == "" || strings.Contains(name, " ") {
		t.Fatalf("want one ReplicaSet running %s, got %q", image, out)
	}
	return name
}

// eventuallyKubectl runs kubectl args until its output contains want, for up to a minute.
func eventuallyKubectl(t *testing.T, dataDir, want string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out := mustKubectl(t, dataDir, nil, args...)
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubedeploy kubectl %s: output still lacks %q after a minute:\n%s", strings.Join(args, " "), want, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSeedWalkthroughWithKubectl is the seed documents' walkthrough (seed
// 001 "deployment 的基本功能", seed 004) typed as a user would, through
// `kubedeploy kubectl`: create, get rs, set image with a change-cause,
// rollout status/history, undo --to-revision, pause/resume, scale, the
// scaling sequences of seed 001 (10 replicas) and seed 004 (3 replicas, one
// by one) as `describe` shows them, the progress-deadline failure of
// `rollout status`, delete.
func TestSeedWalkthroughWithKubectl(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--pod-startup-delay", "300ms", "--pod-termination-delay", "300ms")
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "nginx-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := "deploy/nginx-deployment"
	mustKubectl(t, dir, []string{"deployment.apps/nginx-deployment created"}, "create", "-f", example)
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	mustKubectl(t, dir, []string{"20/20"}, "get", "deployment", "nginx-deployment")
	mustKubectl(t, dir, []string{"nginx-deployment-", "20        20        20"}, "get", "rs")

	walkHistoryAndUndo(t, dir, d)
	walkPauseAndResume(t, dir, d)
	walkScaleAndDeadline(t, dir, d)
	walkScalingSequences(t, dir)
	walkDeleteAll(t, dir)
}

// walkHistoryAndUndo sets deployment d's image with a change-cause, reads
// the rollout history and undoes to revision 1.
func walkHistoryAndUndo(t *testing.T, dir, d string) {
	t.Helper()
	// As the Kubernetes docs do it: change, then record why. (Annotating first
	// would copy the cause to the current ReplicaSet too: RV-2 copies
	// Deployment annotations to the new ReplicaSet on every sync.)
	mustKubectl(t, dir, []string{"image updated"}, "set", "image", d, "nginx-deployment=nginx:1.9.3")
	mustKubectl(t, dir, nil, "annotate", d, "kubernetes.io/change-cause=image nginx:1.9.3")
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	mustKubectl(t, dir, []string{"REVISION", "1         <none>", "2         image nginx:1.9.3"}, "rollout", "history", d)

	mustKubectl(t, dir, []string{"rolled back"}, "rollout", "undo", d, "--to-revision=1")
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	mustKubectl(t, dir, []string{"2         image nginx:1.9.3", "3         <none>"}, "rollout", "history", d)
	mustKubectl(t, dir, []string{"nginx:1.9"}, "get", d, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
}

// walkPauseAndResume pauses deployment d, sets its image and checks that no
// ReplicaSet is created while paused, then resumes it.
func walkPauseAndResume(t *testing.T, dir, d string) {
	t.Helper()
	mustKubectl(t, dir, []string{"paused"}, "rollout", "pause", d)
	before := mustKubectl(t, dir, nil, "get", "rs", "-l", "app=nginx-deployment", "-o", "name")
	mustKubectl(t, dir, []string{"image updated"}, "set", "image", d, "nginx-deployment=nginx:1.10")
	// Nothing may change while paused: once the controller has synced the new
	// generation and then handled everything queued before a barrier
	// Deployment, a (wrong) controller would have created a ReplicaSet.
	client := clientFor(t, dir)
	harness.Eventually(t, time.Minute, "the paused Deployment's new generation to be observed", func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().Deployments("default").Get(ctx, "nginx-deployment", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation, err
	})
	mustKubectl(t, dir, []string{"created"}, "create", "deployment", "paused-barrier", "--image=nginx:1.9")
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", "deploy/paused-barrier", "--timeout=2m")
	if after := mustKubectl(t, dir, nil, "get", "rs", "-l", "app=nginx-deployment", "-o", "name"); after != before {
		t.Fatalf("a ReplicaSet was created while paused:\nbefore %s\nafter %s", before, after)
	}
	mustKubectl(t, dir, []string{"deleted"}, "delete", "deployment", "paused-barrier")
	mustKubectl(t, dir, []string{"DeploymentPaused"}, "describe", d)
	mustKubectl(t, dir, []string{"resumed"}, "rollout", "resume", d)
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
}

// walkScaleAndDeadline scales deployment d to 10, then sets a broken image
// with a 5s progress deadline and checks `rollout status` reports it exceeded.
func walkScaleAndDeadline(t *testing.T, dir, d string) {
	t.Helper()
	mustKubectl(t, dir, []string{"scaled"}, "scale", "deployment", "nginx-deployment", "--replicas", "10")
	mustKubectl(t, dir, []string{"successfully rolled out"}, "rollout", "status", d, "--timeout=2m")
	// `rollout status` only waits for updated/available replicas, so after a
	// scale-down it may return before the surplus pods are gone (upstream too).
	eventuallyKubectl(t, dir, "10/10", "get", "deployment", "nginx-deployment")

	mustKubectl(t, dir, nil, "patch", d, "-p", `{"spec":{"progressDeadlineSeconds":5}}`)
	mustKubectl(t, dir, []string{"image updated"}, "set", "image", d, "nginx-deployment=nginx:broken")
	out, err := kubectl(t, dir, "rollout", "status", d, "--timeout=2m")
	if err == nil || !strings.Contains(out, `deployment "nginx-deployment" exceeded its progress deadline`) {
		t.Fatalf("rollout status of a stuck rollout: err %v, output:\n%s", err, out)
	}
	mustKubectl(t, dir, []string{"ProgressDeadlineExceeded", "ScalingReplicaSet", "deployment-controller"}, "describe", d)
}

// walkScalingSequences checks seed 001's and seed 004's scaling sequences as
// `describe` shows them.
func walkScalingSequences(t *testing.T, dir string) {
	t.Helper()
	// Seed 001's rolling update of 10 replicas and seed 004's one-by-one
	// update of 3, each on a Deployment of its own: the event recorder folds
	// an object's events into one after ten similar ones, so the sequences
	// must come early in a Deployment's life to be read back from describe.
	checkScalingSequence(t, dir, "seed001", "10", []string{
		"Scaled up replica set %[2]s from 0 to 3",
		"Scaled down replica set %[1]s from 10 to 8",
		"Scaled up replica set %[2]s from 3 to 5",
	})
	checkScalingSequence(t, dir, "seed004", "3", []string{
		"Scaled up replica set %[2]s from 0 to 1",
		"Scaled down replica set %[1]s from 3 to 2",
		"Scaled up replica set %[2]s from 1 to 2",
		"Scaled down replica set %[1]s from 2 to 1",
		"Scaled up replica set %[2]s from 2 to 3",
		"Scaled down replica set %[1]s from 1 to 0",
	})
}

// walkDeleteAll deletes the walkthrough's Deployments and waits up to a
// minute for their ReplicaSets and pods to be gone.
func walkDeleteAll(t *testing.T, dir string) {
	t.Helper()
	mustKubectl(t, dir, []string{"deleted"}, "delete", "deployment", "nginx-deployment", "seed001", "seed004")
	deadline := time.Now().Add(time.Minute)
	for {
		out := mustKubectl(t, dir, nil, "get", "rs,pods", "-o", "name")
		if strings.TrimSpace(out) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReplicaSets and pods left a minute after the delete:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
