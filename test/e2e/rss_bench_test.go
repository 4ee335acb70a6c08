package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// BenchmarkControllersRSS measures, on one `kubedeploy up --controllers=`
// cluster, the resident memory of upstream kube-controller-manager running
// only its deployment and replicaset controllers (built from the
// k8s.io/kubernetes version kubedeploy embeds, internal/controlplane/upstreamkcm)
// and of the kubedeploy-controllers binary, one after the other, each as its
// own process: idle (an empty cluster, after 15s) and with a steady
// 1,000-replica Deployment (the largest of 10 samples, 1s apart, 20s after the
// rollout completed). Issue 9 asks that ours be at most upstream's.
//
//	go test -run xxx -bench ControllersRSS -benchtime 1x ./test/e2e
func BenchmarkControllersRSS(b *testing.B) {
	if binary == "" {
		b.Skip("needs the kubedeploy binary (not built with -short)")
	}
	bins := b.TempDir()
	upstream, ours := filepath.Join(bins, "upstreamkcm"), filepath.Join(bins, "kubedeploy-controllers")
	for out, pkg := range map[string]string{upstream: "./internal/controlplane/upstreamkcm", ours: "./cmd/kubedeploy-controllers"} {
		build := exec.Command("go", "build", "-o", out, "github.com/kubedeploy/kubedeploy/"+strings.TrimPrefix(pkg, "./"))
		if msg, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	dir := b.TempDir()
	startUp(b, "--data-dir", dir, "--api-port", "0", "--controllers=")
	client := clientFor(b, dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	for range b.N {
		for _, c := range []struct {
			name string
			cmd  *exec.Cmd
		}{
			{"upstream", exec.Command(upstream, "--kubeconfig="+kubeconfig, "--controllers=deployment-controller,replicaset-controller",
				"--leader-elect=false", "--secure-port=0")},
			{"kubedeploy", exec.Command(ours, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0")},
		} {
			idle, steady := measureRSS(b, client, c.name, c.cmd)
			b.ReportMetric(float64(idle)/1024, c.name+"-idle-MB")
			b.ReportMetric(float64(steady)/1024, c.name+"-1000-replicas-MB")
			b.Logf("%s: RSS idle %d MB, with a steady 1,000-replica Deployment %d MB", c.name, idle/1024, steady/1024)
		}
	}
}

// measureRSS runs cmd, reads its idle RSS, rolls out a 1,000-replica
// Deployment in its own namespace, reads the steady RSS, deletes the
// namespace's Deployment, waits for its pods to be gone and stops cmd. RSS is
// in KiB.
func measureRSS(b *testing.B, client kubernetes.Interface, ns string, cmd *exec.Cmd) (idle, steady int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	time.Sleep(15 * time.Second)
	idle = maxRSS(b, cmd.Process.Pid, 1)

	if _, err := client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "big", 1000, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitFor(ctx, b, "the 1,000-replica rollout by "+ns, out, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "big", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1000 &&
			d.Status.AvailableReplicas == 1000 && d.Status.Replicas == 1000, err
	})
	time.Sleep(20 * time.Second)
	steady = maxRSS(b, cmd.Process.Pid, 10)

	if err := client.AppsV1().Deployments(ns).Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	waitFor(ctx, b, "the pods of "+ns+" to be gone", out, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	return idle, steady
}

// maxRSS returns the largest VmRSS of pid over samples reads 1s apart, in KiB.
func maxRSS(b *testing.B, pid, samples int) int {
	most := 0
	for i := range samples {
		if i > 0 {
			time.Sleep(time.Second)
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(fields[1])
				most = max(most, kb)
			}
		}
		_ = f.Close()
	}
	return most
}

// waitFor polls cond every second until it holds or ctx ends, then fails b
// with the process output.
func waitFor(ctx context.Context, b *testing.B, what string, out *syncBuffer, cond func(context.Context) (bool, error)) {
	for {
		if ok, _ := cond(ctx); ok {
			return
		}
		select {
		case <-ctx.Done():
			b.Fatalf("timed out waiting for %s; controller output:\n%s", what, out)
		case <-time.After(time.Second):
		}
	}
}
