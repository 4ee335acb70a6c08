package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// syncBuffer is a bytes.Buffer safe for the process's writes and the test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }

// controllersProcess is a running `kubedeploy controllers`.
type controllersProcess struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

// startControllers runs `kubedeploy controllers` against dataDir's cluster with short lease settings:
// 5s/3s/1s, so that a cut-off leader gives up (retry period + renew deadline) before a standby takes over,
// and the retry period is a whole second (client-go compares renewTime to the second; see
// manager.LeaderElection.Overlap).
func startControllers(t *testing.T, dataDir string, port int) *controllersProcess {
	t.Helper()
	return startControllersWith(t, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"),
		"--secure-port", fmt.Sprint(port), "--leader-elect-lease-duration=5s",
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
}

// startControllersWith runs `kubedeploy controllers` with args; it is killed
// when t ends, and its output is logged if t failed.
func startControllersWith(t *testing.T, args ...string) *controllersProcess {
	t.Helper()
	return startKubedeploy(t, append([]string{"controllers"}, args...)...)
}

// startKubedeploy runs `kubedeploy` with args as startControllersWith does.
func startKubedeploy(t *testing.T, args ...string) *controllersProcess {
	t.Helper()
	cmd := exec.Command(binary, args...)
	p := &controllersProcess{cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-p.exited
		p.exited <- err
		if t.Failed() {
			t.Logf("kubedeploy %s (pid %d) output:\n%s", args[0], cmd.Process.Pid, p.out)
		}
	})
	return p
}

// leaseHolder returns the Lease holder identity.
func leaseHolder(ctx context.Context, client kubernetes.Interface) (string, error) {
	l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kubedeploy-controllers", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", nil //nolint:nilerr // not there yet
	}
	return *l.Spec.HolderIdentity, nil
}

// TestKillLeaderMidRollout: two `kubedeploy controllers` processes against
// `kubedeploy up --controllers=`; kill -9 of the leader in the middle of a
// 50-replica rollout → the other takes the Lease once it has expired (straight
// from the dead leader's last renewal, no earlier than renewal + lease
// duration) and completes the rollout within the surge bound; SIGTERM of the
// new leader → it releases the Lease, a third process standing by takes the
// released Lease over, and the terminated one exits 0 (issue 4).
func TestKillLeaderMidRollout(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "1s")
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	procs := []*controllersProcess{startControllers(t, dir, 0), startControllers(t, dir, 0)}
	first := waitForNewHolder(t, client, "a leader", "")
	d, err := client.AppsV1().Deployments("default").Create(ctx, harness.NewDeployment("default", "web", 50, "nginx:1.9"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", d.Name, 2*time.Minute)
	w := harness.WatchRollout(t, client, "default", d.Name, harness.Bounds{MaxTotal: 63, MinAvailable: 38})
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.9.3"}]}}}}`
	if _, err := client.AppsV1().Deployments("default").Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "the rollout to be under way", func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().Deployments("default").Get(ctx, d.Name, metav1.GetOptions{})
		return err == nil && got.Status.UpdatedReplicas >= 5 && got.Status.UpdatedReplicas < 40, err
	})
	leader, standby := leaderOf(t, procs, first)
	lease := harness.WatchLease(t, client, "kube-system", "kubedeploy-controllers")
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	second := waitForNewHolder(t, client, "the standby to take the Lease", first)
	t.Logf("standby took over %.1fs after kill -9 of the leader (lease duration 5s)", time.Since(killed).Seconds())
	if err := harness.ExpiredTakeover(lease.Stop(), first, second); err != nil {
		t.Error(err)
	}
	harness.WaitComplete(t, client, "default", d.Name, 2*time.Minute)
	w.Stop()
	w.Check(10)

	// SIGTERM of the leader releases the Lease, so a new standby takes over
	// without waiting for it to expire.
	checkSIGTERMReleasesLease(ctx, t, client, dir, standby, second)
}

// waitForNewHolder waits up to a minute (what names the wait) for the
// Lease to have a holder other than previous ("" for any holder) and
// returns it.
func waitForNewHolder(t *testing.T, client kubernetes.Interface, what, previous string) string {
	t.Helper()
	var holder string
	harness.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx, client)
		holder = h
		return h != "" && h != previous, err
	})
	return holder
}

// checkSIGTERMReleasesLease checks that standby, the leader now, holding the
// Lease as second, releases it on SIGTERM: a third process started against
// dir's cluster, once standing by, takes the released Lease over (not
// through expiry), and standby exits 0 within a minute.
func checkSIGTERMReleasesLease(ctx context.Context, t *testing.T, client kubernetes.Interface, dir string, standby *controllersProcess, second string) {
	t.Helper()
	if h, err := leaseHolder(ctx, client); err != nil || h != second {
		t.Fatalf("lease holder after the rollout = %q (%v), want the standby %s still", h, err, second)
	}
	third := startControllers(t, dir, 0)
	harness.Eventually(t, time.Minute, "the third process to stand by", func(context.Context) (bool, error) {
		return bytes.Contains(third.out.Bytes(), []byte(`"Observed leader"`)), nil
	})
	lease := harness.WatchLease(t, client, "kube-system", "kubedeploy-controllers")
	if err := standby.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	terminated := time.Now()
	last := waitForNewHolder(t, client, "the third process to take the released Lease", second)
	t.Logf("new standby took over %.1fs after SIGTERM of the leader (lease duration 5s)", time.Since(terminated).Seconds())
	if err := harness.ReleasedTakeover(lease.Stop(), second, last); err != nil {
		t.Errorf("the Lease was not released: %v", err)
	}
	select {
	case err := <-standby.exited:
		standby.exited <- err
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("kubedeploy controllers did not exit within a minute of SIGTERM")
	}
}

// leaderOf returns the process whose log says it acquired identity's Lease, and the other one.
func leaderOf(t *testing.T, procs []*controllersProcess, identity string) (leader, other *controllersProcess) {
	t.Helper()
	for i, p := range procs {
		if bytes.Contains(p.out.Bytes(), []byte(`"Acquired the lease; starting controllers"`)) &&
			bytes.Contains(p.out.Bytes(), []byte(identity)) {
			return p, procs[1-i]
		}
	}
	t.Fatalf("no process logged acquiring the Lease as %s", identity)
	return nil, nil
}
