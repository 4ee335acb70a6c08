package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
	"github.com/kubedeploy/kubedeploy/internal/testing/helmtool"
)

// TestHelmChartInstallsAndRuns is issue 36's install test: on `kubedeploy up --controllers=`, Helm's own command
// refuses a bad value with the chart schema's message and installs nothing; `helm install` of deploy/chart with its
// default values makes the controllers' pods run (KWOK simulates them, running no process), and `kubedeploy
// controllers` run with the installed container's arguments under the installed ServiceAccount's identity takes
// the Lease and rolls the seeds' Deployment within its surge bounds; the same chart with values-observe.yaml installs
// observe mode, whose /metrics, run the same way, count that rollout. The pods' serving address and port are the
// only arguments changed: tests listen on 127.0.0.1 only.
func TestHelmChartInstallsAndRuns(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=")
	client := clientFor(t, dir)
	chart := filepath.Join(deployDir(t), "chart", "kubedeploy")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const seed = "nginx-deployment" // the seeds' rolling update: 10 replicas, nginx:1.9 to nginx:1.9.3, 25% surge and unavailable

	checkInstallRefused(ctx, t, client, dir, chart)
	runInstalledControllers(ctx, t, client, dir, chart)
	if _, err := client.AppsV1().Deployments("default").Create(ctx, harness.NewDeployment("default", seed, 10, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", seed, 2*time.Minute)
	base := runInstalledObserve(ctx, t, client, dir, chart)

	w := harness.WatchRollout(t, client, "default", seed, harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"` + seed + `","image":"nginx:1.9.3"}]}}}}`
	if _, err := client.AppsV1().Deployments("default").Patch(ctx, seed, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.WaitComplete(t, client, "default", seed, 2*time.Minute)
	w.Stop()
	w.Check(4)
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
		t.Errorf("revision = %q after the rollout, want 2", got)
	}
	want := `kubedeploy_deployment_rollouts_total{deployment="` + seed + `",namespace="default",outcome="complete"} 1`
	harness.Eventually(t, time.Minute, "observe mode's /metrics to count the rollout", func(ctx context.Context) (bool, error) {
		body, _ := httpGet(ctx, base+"/metrics")
		return strings.Contains(body, want), nil
	})
}

// checkInstallRefused checks that `helm install` of chart with replicas=-1 on dataDir's cluster is refused by the
// chart's schema, naming /replicas, and creates no StatefulSet.
func checkInstallRefused(ctx context.Context, t *testing.T, client kubernetes.Interface, dataDir, chart string) {
	t.Helper()
	_, err := helmtool.Run(t, "install", "refused", chart, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"), "-n", deploy.Namespace, "--create-namespace", "--set", "replicas=-1")
	if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), "/replicas") {
		t.Fatalf("helm install --set replicas=-1: %v; want the chart schema to refuse /replicas", err)
	}
	if _, err := client.AppsV1().StatefulSets(deploy.Namespace).Get(ctx, "kubedeploy-controllers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the refused install, the StatefulSet: %v; want none", err)
	}
}

// runInstalledControllers installs chart with its default values on dataDir's cluster, waits for the controller
// pods to run, then runs `kubedeploy controllers` (the image's kubedeploy-controllers) with the installed
// container's arguments as the installed ServiceAccount, and waits for it to take the Lease.
func runInstalledControllers(ctx context.Context, t *testing.T, client kubernetes.Interface, dataDir, chart string) {
	t.Helper()
	out, err := helmtool.Run(t, "install", "kubedeploy", chart, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"), "-n", deploy.Namespace, "--create-namespace")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install:\n%s", out)
	sts, err := client.AppsV1().StatefulSets(deploy.Namespace).Get(ctx, "kubedeploy-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(t, client, deploy.Namespace, "app.kubernetes.io/name=kubedeploy-controllers", int(*sts.Spec.Replicas))
	pod := sts.Spec.Template.Spec
	args := podArgs(pod.Containers[0].Args, map[string]string{"--bind-address": "127.0.0.1", "--secure-port": "0"})
	args = append(args, "--kubeconfig", tokenKubeconfig(t, client, dataDir, deploy.Namespace, pod.ServiceAccountName))
	t.Logf("kubedeploy controllers %s (as %s/%s)", strings.Join(args[:len(args)-2], " "), deploy.Namespace, pod.ServiceAccountName)
	startControllersWith(t, args...)
	holder := waitForNewHolder(t, client, "the chart's controllers to take the Lease", "")
	t.Logf("Lease held by %s", holder)
}

// runInstalledObserve installs chart with values-observe.yaml on dataDir's cluster, runs `kubedeploy observe` (the
// image's kubedeploy-controllers observe) with the installed container's arguments as the installed
// ServiceAccount, waits for it to be ready and returns the base URL of its metrics.
func runInstalledObserve(ctx context.Context, t *testing.T, client kubernetes.Interface, dataDir, chart string) string {
	t.Helper()
	if _, err := helmtool.Run(t, "install", "kubedeploy-observe", chart, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"),
		"-n", "kubedeploy-observe", "--create-namespace", "-f", filepath.Join(chart, "values-observe.yaml")); err != nil {
		t.Fatal(err)
	}
	obs, err := client.AppsV1().Deployments("kubedeploy-observe").Get(ctx, "kubedeploy-observe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	pod := obs.Spec.Template.Spec
	args := podArgs(pod.Containers[0].Args, map[string]string{"--bind-address": "127.0.0.1", "--port": fmt.Sprint(port)})
	args = append(args, "--kubeconfig", tokenKubeconfig(t, client, dataDir, "kubedeploy-observe", pod.ServiceAccountName))
	if args[0] != "observe" {
		t.Fatalf("observe mode's container args %q do not start with observe", args)
	}
	startKubedeploy(t, args...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	harness.Eventually(t, time.Minute, "observe mode to be ready", func(ctx context.Context) (bool, error) {
		_, code := httpGet(ctx, base+"/readyz")
		return code == http.StatusOK, nil
	})
	return base
}

// podArgs returns a container's args with the flags in set given set's values instead (flag=value form).
func podArgs(args []string, set map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := set[name]; ok {
			a = name + "=" + v
		}
		out = append(out, a)
	}
	return out
}

// tokenKubeconfig writes, next to dataDir's kubeconfig, one that authenticates as ServiceAccount ns/name with a
// bound token (TokenRequest), as the pod would, and returns its path.
func tokenKubeconfig(t *testing.T, client kubernetes.Interface, dataDir, ns, name string) string {
	t.Helper()
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, name, err)
	}
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: tr.Status.Token}}
	cfg.Contexts = map[string]*clientcmdapi.Context{"sa": {Cluster: ctx.Cluster, AuthInfo: "sa"}}
	cfg.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), ns+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitPodsRunning waits up to 2 minutes for n pods of selector in ns to be scheduled, running and ready.
func waitPodsRunning(t *testing.T, client kubernetes.Interface, ns, selector string, n int) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods %s to run", n, selector), func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning && podReady(p) {
				running++
			}
		}
		return running == n && len(list.Items) == n, nil
	})
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// httpGet returns the body and status code of GET url; code 0 when it failed.
func httpGet(ctx context.Context, url string) (string, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}
