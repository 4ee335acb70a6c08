package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestCtrlCDuringRolloutsReleasesTheLease is issue 9's clean stop: Ctrl-C
// `kubedeploy up` in the middle of a rollout, several times. Each time it
// exits 0, prints nothing after its ready lines but the one-line goodbye
// (no error line, even with syncs in flight), and has released the
// controllers' Lease: read by an `up --controllers=`, which runs no
// controllers and so never takes the Lease, the holder is empty. CI runs 3;
// KUBEDEPLOY_E2E_CTRLC_RUNS=10 runs the 10.
func TestCtrlCDuringRolloutsReleasesTheLease(t *testing.T) {
	skipShort(t)
	runs := 3
	if v := os.Getenv("KUBEDEPLOY_E2E_CTRLC_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KUBEDEPLOY_E2E_CTRLC_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--api-port", "0", "--pod-startup-delay", "1s"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	p := startUp(t, args...)
	client := clientFor(t, dir)
	if _, err := client.AppsV1().Deployments("default").Create(ctx, harness.NewDeployment("default", "web", 20, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", "web", 2*time.Minute)
	for run := range runs {
		harness.SetImage(ctx, t, client, "default", "web", "web", fmt.Sprintf("nginx:1.9-%d", run+1))
		harness.Eventually(t, time.Minute, "the rollout to start", func(ctx context.Context) (bool, error) {
			return rollingOut(ctx, client, "web")
		})
		readyOutput := len(p.out.String())
		p.interrupt(t)
		if after := strings.TrimSpace(p.out.String()[readyOutput:]); after != "Stopped; state is kept in "+dir+"." {
			t.Errorf("run %d: after Ctrl-C up printed %q, want only its goodbye line", run, after)
		}

		idle := startUp(t, append(args, "--controllers=")...)
		lease, err := clientFor(t, dir).CoordinationV1().Leases("kube-system").Get(ctx, "kubedeploy-controllers", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("run %d: reading the Lease: %v", run, err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "kubedeploy.log"))
			t.Errorf("run %d: the Lease is still held by %q after Ctrl-C, want it released; controllers log:\n%s", run, *h, tail(string(log), 30))
		}
		idle.interrupt(t)

		p = startUp(t, args...)
		client = clientFor(t, dir)
	}
	harness.WaitComplete(t, client, "default", "web", 3*time.Minute)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
