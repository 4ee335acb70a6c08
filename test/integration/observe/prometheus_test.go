package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// stuckAfter is the stuck alert's threshold in this test, in seconds: the rules file says 300, which a test
// should not wait out (promtool's unit test in deploy/prometheus covers the 300). KUBEDEPLOY_RULES_AS_SHIPPED=1
// runs the rules file as it is, 300 included (about 6 minutes).
var stuckAfter = 10

func init() {
	if os.Getenv("KUBEDEPLOY_RULES_AS_SHIPPED") != "" {
		stuckAfter = 300
	}
}

// Issue 25: a real Prometheus (Debian's package) scraping observe mode, with kubedeploy's alert rules, fires
// KubedeployRolloutStuck for a rollout whose new pods cannot pull their image, labelled with the reason
// ImagePullBackOff.
func TestPrometheusFiresStuckAlert(t *testing.T) {
	harness.Skip(t, env)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	ctx := harness.Context(t, time.Duration(stuckAfter)*time.Second+5*time.Minute)
	observeLn := listen(t)
	stop := env.RunControllers(manager.Config{
		RESTConfig: env.Config, Controllers: []string{}, Observe: true, Serving: manager.Serving{Listener: observeLn},
	})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("observe: %v", err)
		}
	}()
	promURL := startPrometheus(ctx, t, promBin, observeLn.Addr().String())

	ns := env.Namespace(t)
	d := harness.NewDeployment(ns, "stuck", 2, "nginx:1.9")
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "stuck", 2*time.Minute)
	harness.SetImage(ctx, t, env.Client, ns, "stuck", "stuck", "nginx:broken")
	start := time.Now()
	var labels map[string]string
	harness.Eventually(t, time.Duration(stuckAfter)*time.Second+3*time.Minute, "KubedeployRolloutStuck to fire for "+ns+"/stuck", func(ctx context.Context) (bool, error) {
		labels = firing(ctx, t, promURL, "KubedeployRolloutStuck", ns, "stuck")
		return labels != nil, nil
	})
	t.Logf("KubedeployRolloutStuck fired %.0fs after the image was set (threshold %ds), labels %v", time.Since(start).Seconds(), stuckAfter, labels)
	if labels["reason"] != "ImagePullBackOff" || labels["waiting_on"] != "image_pull" {
		t.Errorf("alert labels %v, want reason ImagePullBackOff, waiting_on image_pull", labels)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startPrometheus runs prometheus on a free loopback port, scraping target every second with kubedeploy's rules
// (the stuck threshold lowered to stuckAfter), until t ends; it returns its URL once it is ready.
func startPrometheus(ctx context.Context, t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "prometheus", "kubedeploy-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), ") > 300") {
		t.Fatal("the stuck rule's threshold (> 300) is not in deploy/prometheus/kubedeploy-rules.yaml")
	}
	lowered := strings.Replace(string(rules), ") > 300", fmt.Sprintf(") > %d", stuckAfter), 1)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("rules.yaml", lowered)
	config := write("prometheus.yml", fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
  - job_name: kubedeploy-observe
    static_configs: [{targets: [%q]}]
`, target))
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	url := "http://" + addr
	harness.Eventually(t, time.Minute, "prometheus to be ready", func(ctx context.Context) (bool, error) {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return url
}

// firing returns the labels of the firing alert named name for Deployment ns/deployment, nil when none fires.
func firing(ctx context.Context, t *testing.T, url, name, ns, deployment string) map[string]string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("prometheus /api/v1/alerts: %v", err)
	}
	for _, a := range body.Data.Alerts {
		if a.State == "firing" && a.Labels["alertname"] == name && a.Labels["namespace"] == ns && a.Labels["deployment"] == deployment {
			return a.Labels
		}
	}
	return nil
}
