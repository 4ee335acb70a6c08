package differential

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

const (
	// conflictRunsEnv, when set to N, runs TestConflictsBesideUpstream N times per cluster and lifts both
	// clusters' controller clients to liftedQPS/liftedBurst (the children read it at start).
	conflictRunsEnv  = "KUBEDEPLOY_CONFLICTS_RUNS"
	liftedQPS        = 5000
	liftedBurst      = 10000
	conflictReplicas = 1000
)

// TestConflictsBesideUpstream is issue 7's 409 measurement, not a pass/fail test: on each cluster in turn (never
// both at once), a 1,000-replica Deployment (25%/25%) is created and rolled out to a new image with the
// controllers' clients at --kube-api-qps 5000 --kube-api-burst 10000, and kube-apiserver's
// apiserver_request_total is read before and after the rollout. It logs, per run and cluster, the 409s and 422s
// by verb and resource, and the medians. Opt-in (heavy):
//
//	KUBEDEPLOY_CONFLICTS_RUNS=3 go test -timeout 90m -run TestConflictsBesideUpstream -v ./test/differential/
func TestConflictsBesideUpstream(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv(conflictRunsEnv))
	if runs < 1 {
		t.Skipf("set %s=N to measure conflicts beside upstream", conflictRunsEnv)
	}
	if upstream == nil || ours == nil {
		t.Skip("clusters not started (-short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(runs)*40*time.Minute)
	defer cancel()
	totals := map[string][]int{}
	for i := range runs {
		for _, c := range []*cluster{upstream, ours} {
			got, took := conflictRun(ctx, t, c.client, fmt.Sprintf("conflicts-%d", i))
			var n409, n422 int
			var kinds []string
			for k, v := range got {
				kinds = append(kinds, fmt.Sprintf("%s=%d", k, v))
				if strings.HasPrefix(k, "409") {
					n409 += v
				} else {
					n422 += v
				}
			}
			slices.Sort(kinds)
			t.Logf("run %d %-8s rollout %v: %d×409, %d×422 %v", i, c.role, took.Round(time.Second), n409, n422, kinds)
			totals[c.role+" 409"] = append(totals[c.role+" 409"], n409)
			totals[c.role+" 422"] = append(totals[c.role+" 422"], n422)
		}
	}
	for _, k := range []string{"upstream 409", "upstream 422", "ours 409", "ours 422"} {
		t.Logf("median %s over %d runs: %d (all: %v)", k, runs, median(totals[k]), totals[k])
	}
}

// conflictRun creates the Deployment in a new namespace, waits for it, rolls it out, and returns the 409 and
// 422 responses kube-apiserver counted during the rollout ("409 PATCH replicasets/status" → n) and how long the
// rollout took. It deletes the namespace and waits for its pods to be gone before returning.
func conflictRun(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) (map[string]int, time.Duration) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.NewDeployment(ns, "big", conflictReplicas, "nginx:1.9")
	s, u := intstr.FromString("25%"), intstr.FromString("25%")
	d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable = &s, &u
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, ns, "big", 15*time.Minute)
	before := requestCodes(ctx, t, client)
	start := time.Now()
	harness.SetImage(ctx, t, client, ns, "big", "big", "nginx:1.9.3")
	harness.Eventually(t, 15*time.Minute, "the rollout to start", func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().Deployments(ns).Get(ctx, "big", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration >= got.Generation, err
	})
	harness.WaitComplete(t, client, ns, "big", 15*time.Minute)
	took := time.Since(start)
	after := requestCodes(ctx, t, client)
	out := map[string]int{}
	for k, v := range after {
		if n := int(v - before[k]); n > 0 {
			out[k] = n
		}
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s not gone: %v", ns, err)
	}
	return out, took
}

// requestCodes reads kube-apiserver's /metrics and returns apiserver_request_total for codes 409 and 422, keyed
// "code VERB resource/subresource".
func requestCodes(ctx context.Context, t *testing.T, client kubernetes.Interface) map[string]float64 {
	t.Helper()
	return harness.APIServerRequests(ctx, t, client, func(l map[string]string) string {
		if l["code"] != "409" && l["code"] != "422" {
			return ""
		}
		return l["code"] + " " + l["verb"] + " " + l["resource"] + "/" + l["subresource"]
	})
}

func median(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
