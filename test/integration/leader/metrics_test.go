package leader

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestHealthAndMetrics: the health endpoints answer anyone; /metrics is
// refused to anonymous and unauthorized callers and served, in Prometheus text
// format with the promised metrics, to a token or a client certificate whose
// user may get nonResourceURL /metrics, as decided by the API server; with
// profiling on, /debug/pprof/ is authorized the same way.
func TestHealthAndMetrics(t *testing.T) {
	harness.Skip(t, env)
	ns := env.Namespace(t)
	resetLease(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + ln.Addr().String()
	startMember(t, "served", identityConfig(t), shortLease, manager.Serving{Listener: ln, Profiling: true})
	waitHolder(t, "served", 30*time.Second)

	ctx := harness.Context(t, 3*time.Minute)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "web", 4, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 90*time.Second)
	setImage(ctx, t, ns, "web", "nginx:1.9.3")
	harness.WaitComplete(t, env.Client, ns, "web", 90*time.Second)

	anon := httpsClient(nil)
	checkHealthEndpoints(t, anon, base)
	checkMetricsRefused(ctx, t, ns, anon, base)

	reader := tokenConfig(t, ns, serviceAccount(ctx, t, ns, "prometheus"))
	bindMetricsReader(ctx, t, rbacv1.Subject{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns})
	var body string
	harness.Eventually(t, 30*time.Second, "/metrics with the reader's token", func(context.Context) (bool, error) {
		var code int
		code, body = get(t, anon, base+"/metrics", reader.BearerToken)
		return code == http.StatusOK, nil
	})
	checkMetrics(t, body)

	// Issue 11: why-stuck on a dashboard. Both pods of an nginx:broken
	// Deployment wait in ImagePullBackOff (the KWOK stage), and the gauge
	// says so, per namespace, Deployment and reason.
	checkStuckGauge(ctx, t, ns, anon, base, reader.BearerToken)

	certCfg, err := env.ControlPlane.ClientConfig("metrics-scraper-" + ns)
	if err != nil {
		t.Fatal(err)
	}
	bindMetricsReader(ctx, t, rbacv1.Subject{Kind: "User", Name: "metrics-scraper-" + ns, APIGroup: rbacv1.GroupName})
	pair, err := tls.X509KeyPair(certCfg.CertData, certCfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "/metrics with a client certificate", func(context.Context) (bool, error) {
		code, _ := get(t, httpsClient(&pair), base+"/metrics", "")
		return code == http.StatusOK, nil
	})

	// --profiling: pprof is authorized like /metrics: the metrics reader may not, system:masters may.
	checkProfilingAuthorized(t, anon, base, &pair)
}

// checkHealthEndpoints checks that /healthz, /livez and /readyz at base
// answer anon "ok" (within 30s), and that /readyz?verbose lists the
// informer-sync and leaderElection checks.
func checkHealthEndpoints(t *testing.T, anon *http.Client, base string) {
	t.Helper()
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		harness.Eventually(t, 30*time.Second, path+" ok", func(context.Context) (bool, error) {
			code, body := get(t, anon, base+path, "")
			return code == http.StatusOK && strings.TrimSpace(body) == "ok", nil
		})
	}
	if code, body := get(t, anon, base+"/readyz?verbose", ""); !strings.Contains(body, "informer-sync ok") || !strings.Contains(body, "leaderElection ok") {
		t.Errorf("/readyz?verbose = %d %q, want informer-sync and leaderElection checks", code, body)
	}
}

// checkMetricsRefused checks that /metrics at base is refused to an
// anonymous caller and to the token of a ServiceAccount of ns with no role.
func checkMetricsRefused(ctx context.Context, t *testing.T, ns string, anon *http.Client, base string) {
	t.Helper()
	if code, _ := get(t, anon, base+"/metrics", ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous /metrics = %d, want 401 or 403", code)
	}
	unbound := tokenConfig(t, ns, serviceAccount(ctx, t, ns, "nobody"))
	if code, _ := get(t, anon, base+"/metrics", unbound.BearerToken); code != http.StatusForbidden {
		t.Errorf("/metrics with an unauthorized token = %d, want 403", code)
	}
}

// checkStuckGauge creates Deployment ns/stuck of 2 nginx:broken pods and
// waits up to 60s for /metrics at base, read with token, to count both
// unavailable in ImagePullBackOff.
func checkStuckGauge(ctx context.Context, t *testing.T, ns string, anon *http.Client, base, token string) {
	t.Helper()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "stuck", 2, "nginx:broken"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	series := fmt.Sprintf(`kubedeploy_deployment_unavailable_pods{deployment="stuck",namespace=%q,reason="ImagePullBackOff"} 2`, ns)
	harness.Eventually(t, 60*time.Second, series, func(context.Context) (bool, error) {
		code, body := get(t, anon, base+"/metrics", token)
		return code == http.StatusOK && strings.Contains(body, series+"\n"), nil
	})
}

// checkProfilingAuthorized checks that /debug/pprof/ at base is refused to
// anon and to reader, the metrics reader's client certificate, and served to
// system:masters.
func checkProfilingAuthorized(t *testing.T, anon *http.Client, base string, reader *tls.Certificate) {
	t.Helper()
	if code, _ := get(t, anon, base+"/debug/pprof/cmdline", ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous /debug/pprof/cmdline = %d, want 401 or 403", code)
	}
	if code, _ := get(t, httpsClient(reader), base+"/debug/pprof/cmdline", ""); code != http.StatusForbidden {
		t.Errorf("/debug/pprof/cmdline for the metrics reader = %d, want 403", code)
	}
	admin := env.ControlPlane.AdminConfig()
	adminPair, err := tls.X509KeyPair(admin.CertData, admin.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, httpsClient(&adminPair), base+"/debug/pprof/heap?debug=1", ""); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("/debug/pprof/heap for system:masters = %d %.100q, want 200 and a heap profile", code, body)
	}
}

func checkMetrics(t *testing.T, body string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	want := map[string]func(*dto.MetricFamily) error{
		"kubedeploy_controller_sync_duration_seconds": hasLabels("controller", "deployment", "replicaset"),
		"kubedeploy_deployment_rollout_duration_seconds": func(f *dto.MetricFamily) error {
			if n := f.GetMetric()[0].GetHistogram().GetSampleCount(); n < 2 {
				return fmt.Errorf("%d rollouts observed, want at least 2", n)
			}
			return nil
		},
		"kubedeploy_deployment_rollouts_total":     hasLabels("outcome", "complete"),
		"kubedeploy_expectations_expired_total":    hasLabels("controller", "replicaset"),
		"kubedeploy_cache_behind_waits_total":      hasLabels("controller", "deployment", "replicaset"),
		"kubedeploy_cache_behind_live_reads_total": hasLabels("controller", "deployment", "replicaset"),
		"workqueue_adds_total":                     hasLabels("name", "deployment", "replicaset"),
		"workqueue_work_duration_seconds":          hasLabels("name", "deployment", "replicaset"),
		"leader_election_master_status":            hasLabels("name", manager.DefaultResourceName),
	}
	for name, check := range want {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		if err := check(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// hasLabels checks that the family has a series for each of the values of label.
func hasLabels(label string, values ...string) func(*dto.MetricFamily) error {
	return func(f *dto.MetricFamily) error {
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					seen[l.GetValue()] = true
				}
			}
		}
		for _, v := range values {
			if !seen[v] {
				return fmt.Errorf("no series with %s=%q (have %v)", label, v, seen)
			}
		}
		return nil
	}
}

func httpsClient(cert *tls.Certificate) *http.Client {
	// The serving certificate is self-signed, as kube-controller-manager's is by default.
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test client for a self-signed server
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func serviceAccount(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func bindMetricsReader(ctx context.Context, t *testing.T, s rbacv1.Subject) {
	t.Helper()
	name := "metrics-reader-" + strings.ToLower(s.Kind) + "-" + s.Namespace + "-" + s.Name
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubedeploy:metrics-reader"},
		Subjects:   []rbacv1.Subject{s},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
