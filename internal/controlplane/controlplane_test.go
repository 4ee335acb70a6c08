package controlplane

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func startControlPlane(t *testing.T, ctx context.Context, dir string) (*ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp, err := New(Config{DataDir: dir, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := cp.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %s (server %s)", time.Since(begin).Round(time.Millisecond), cp.Server())
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cp, client
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitForPod(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return cond(pod), nil
	})
	if err != nil {
		t.Fatalf("pod %s: condition not met: %v; last status %+v", name, err, last)
	}
	return last
}

func bareP(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// createPod creates a pod in default, retrying while the default service account does not exist yet.
func createPod(t *testing.T, ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Logf("create pod %s: %v", pod.Name, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

func TestStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp, client := startControlPlane(t, ctx, dir)
	defer cp.Stop()

	assertKubeconfigAndNodes(t, ctx, cp, client)

	assertClientConfig(t, ctx, cp)

	createPod(t, ctx, client, bareP("good", "nginx:1.25"))
	good := waitForPod(t, ctx, client, "good", func(p *corev1.Pod) bool {
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && podReady(p)
	})
	if good.Status.PodIP == "" || len(good.Status.ContainerStatuses) != 1 || !good.Status.ContainerStatuses[0].Ready {
		t.Errorf("good pod status = %+v", good.Status)
	}
	t.Logf("pod good bound to %s, Running and Ready", good.Spec.NodeName)

	createPod(t, ctx, client, bareP("broken", "nginx:broken"))
	assertBrokenPodStaysUnready(t, ctx, client, "broken")
	deletePodAndWait(t, ctx, client, "broken")

	stopCleanly(t, cp)

	cp2, client2 := startControlPlane(t, ctx, dir)
	defer cp2.Stop()
	pod, err := client2.CoreV1().Pods("default").Get(ctx, "good", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod good lost across restart: %v", err)
	}
	if pod.UID != good.UID {
		t.Errorf("pod good UID changed across restart")
	}
	// A pod created after the restart gets an address of its own, not the running pod's (podIPs).
	createPod(t, ctx, client2, bareP("after", "nginx:1.25"))
	after := waitForPod(t, ctx, client2, "after", func(p *corev1.Pod) bool { return p.Status.PodIP != "" && podReady(p) })
	if after.Status.PodIP == good.Status.PodIP {
		t.Errorf("pod after the restart got %s, pod good's address", after.Status.PodIP)
	}
	if err := cp2.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// assertKubeconfigAndNodes checks that cp's kubeconfig is private (0600) and
// usable, and that the cluster has its 2 nodes, each Ready.
func assertKubeconfigAndNodes(t *testing.T, ctx context.Context, cp *ControlPlane, client kubernetes.Interface) {
	t.Helper()
	if info, err := os.Stat(cp.KubeconfigPath()); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %s: %v %v", cp.KubeconfigPath(), info, err)
	}
	if _, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath()); err != nil {
		t.Fatalf("kubeconfig unusable: %v", err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Fatalf("nodes = %d, want 2", len(nodes.Items))
	}
	for i := range nodes.Items {
		if !nodeReady(&nodes.Items[i]) {
			t.Errorf("node %s not Ready", nodes.Items[i].Name)
		}
	}
}

// stopCleanly stops cp, logging how long it took, and checks that Done is
// closed and Err is nil after a clean stop.
func stopCleanly(t *testing.T, cp *ControlPlane) {
	t.Helper()
	stopBegin := time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(stopBegin).Round(time.Millisecond))
	select {
	case <-cp.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := cp.Err(); err != nil {
		t.Fatalf("Err after clean stop = %v", err)
	}
}

// assertBrokenPodStaysUnready waits for ImagePullBackOff, then for a good pod created after it to become Ready
// (KWOK has had its turn at both), and checks that the broken pod is still Pending and not Ready, its status not
// written since the back-off (the same resourceVersion).
func assertBrokenPodStaysUnready(t *testing.T, ctx context.Context, client kubernetes.Interface, name string) {
	t.Helper()
	p := waitForPod(t, ctx, client, name, func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ImagePullBackOff"
	})
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; msg != `Back-off pulling image "nginx:broken"` {
		t.Errorf("waiting message = %q", msg)
	}
	later := name + "-later"
	createPod(t, ctx, client, bareP(later, "nginx:1.25"))
	waitForPod(t, ctx, client, later, podReady)
	cur, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if podReady(cur) || cur.Status.Phase != corev1.PodPending || cur.ResourceVersion != p.ResourceVersion {
		t.Fatalf("pod %s with a broken image changed after its back-off (resourceVersion %s, was %s): %+v", name, cur.ResourceVersion, p.ResourceVersion, cur.Status)
	}
	deletePodAndWait(t, ctx, client, later)
}

// deletePodAndWait deletes a pod with the default grace period and waits until KWOK has really removed it.
func deletePodAndWait(t *testing.T, ctx context.Context, client kubernetes.Interface, name string) {
	t.Helper()
	if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s not removed: %v", name, err)
	}
}

// assertClientConfig checks ClientConfig identities authenticate and that RBAC applies to them.
func assertClientConfig(t *testing.T, ctx context.Context, cp *ControlPlane) {
	t.Helper()
	nobodyCfg, err := cp.ClientConfig("kubedeploy:nobody")
	if err != nil {
		t.Fatal(err)
	}
	nobody := kubernetes.NewForConfigOrDie(nobodyCfg)
	if _, err := nobody.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("unprivileged identity listing pods = %v, want Forbidden", err)
	}
	adminCfg, err := cp.ClientConfig("kubedeploy:test-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(adminCfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("system:masters identity listing pods = %v", err)
	}
}
