package grafana

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

var update = flag.Bool("update", false, "rewrite kubedeploy-rollouts.json, and the Helm chart's copy, from Dashboard")

const file = "kubedeploy-rollouts.json"

// chartCopy is the Helm chart's copy of file (deploy/chart's tests check it is file).
const chartCopy = "../chart/kubedeploy/files/kubedeploy-rollouts.json"

// The committed JSON is Dashboard's, as the SDK marshals it (-update rewrites it and the chart's copy).
func TestDashboardJSONIsGenerated(t *testing.T) {
	d, err := Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		for _, f := range []string{file, chartCopy} {
			if err := os.WriteFile(f, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./deploy/grafana -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from Dashboard(): go test ./deploy/grafana -update rewrites it", file)
	}
}

// The JSON reads back with the SDK's types (panels and queries included), and every metric it queries is one
// kubedeploy exports.
func TestDashboardReadsBackAndQueriesOurMetrics(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s does not read back: %v", file, err)
	}
	if d.Uid == nil || *d.Uid != UID || len(d.Panels) < 6 {
		t.Fatalf("dashboard uid %v, %d panels", d.Uid, len(d.Panels))
	}
	exported := []string{
		"kubedeploy_deployment_rollouts_total", "kubedeploy_deployment_rollout_duration_seconds_bucket",
		"kubedeploy_deployment_rollout_age_seconds", "kubedeploy_deployment_rollout_waited_seconds",
		"kubedeploy_deployment_rollout_waiting_seconds", "kubedeploy_deployment_unavailable_pods",
		"kubedeploy_shadow_divergences_total", "kubedeploy_shadow_bound_violations_total", "kubedeploy_shadow_checks_total",
		"kubedeploy_analysis_measurements_total", "kubedeploy_analysis_last_value", "kubedeploy_analysis_run_seconds",
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`kubedeploy_[a-z_]+`).FindAllString(string(data), -1) {
		seen[m] = true
		if !slices.Contains(exported, m) {
			t.Errorf("the dashboard queries %s, which kubedeploy does not export", m)
		}
	}
	for _, m := range exported {
		if !seen[m] {
			t.Errorf("the dashboard shows nothing of %s", m)
		}
	}
}
