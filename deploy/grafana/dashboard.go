// Package grafana builds kubedeploy's Grafana dashboard (kubedeploy-rollouts.json) with Grafana's own
// grafana-foundation-sdk (issue 25): rollouts ended over time by outcome, their durations, the rollouts in progress
// with what they wait on and why, the time waited by what, and the Deployments' unavailable pods by reason, from
// the metrics `kubedeploy controllers` and `kubedeploy observe` export. The JSON is generated, never edited by
// hand: `go test ./deploy/grafana -update` rewrites it, and the test fails while it differs from Dashboard's.
package grafana

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's uid: a link to it survives an import.
const UID = "kubedeploy-rollouts"

// datasource is the dashboard's Prometheus data source: the ${datasource} variable.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func ptr[T any](v T) *T { return &v }

// query is one PromQL query of the dashboard's data source.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource)
}

// Dashboard returns the dashboard, or the builder's error for an invalid one.
func Dashboard() (dashboard.Dashboard, error) {
	ns := `namespace=~"$namespace"`
	return dashboard.NewDashboardBuilder("kubedeploy: rollouts").
		Uid(UID).
		Description("Deployment rollouts as kubedeploy sees them (kubedeploy controllers or kubedeploy observe): how they end, how long they take, what the ones in progress wait on and why.").
		Tags([]string{"kubedeploy", "deployments", "rollouts"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").Label("Namespace").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: ptr("label_values(kubedeploy_deployment_rollouts_total, namespace)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*")).
		WithRow(dashboard.NewRowBuilder("Rollouts")).
		WithPanel(stat.NewPanelBuilder().Title("Rollouts in progress").Span(4).Height(6).
			Description("Deployments whose new ReplicaSet has not completed, failed or been replaced yet.").
			WithTarget(query(`count(kubedeploy_deployment_rollout_age_seconds{`+ns+`}) or vector(0)`, "in progress"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Rollouts ended, by outcome").Span(10).Height(6).
			Description("complete; failed: ProgressDeadlineExceeded; rolled_back: an older ReplicaSet became the new one; superseded: a newer one did.").
			Unit("short").Min(0).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
			WithTarget(query(`sum by (outcome) (increase(kubedeploy_deployment_rollouts_total{`+ns+`}[$__rate_interval]))`, "{{outcome}}"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Rollout duration").Span(10).Height(6).
			Description("From a ReplicaSet becoming the new one to its rollout's end; all namespaces.").
			Unit("s").Min(0).
			WithTarget(query(`histogram_quantile(0.5, sum by (le, outcome) (rate(kubedeploy_deployment_rollout_duration_seconds_bucket[$__rate_interval])))`, "p50 {{outcome}}")).
			WithTarget(query(`histogram_quantile(0.9, sum by (le, outcome) (rate(kubedeploy_deployment_rollout_duration_seconds_bucket[$__rate_interval])))`, "p90 {{outcome}}"))).
		WithRow(dashboard.NewRowBuilder("Rollouts in progress: what they wait on")).
		WithPanel(table.NewPanelBuilder().Title("Waiting now").Span(24).Height(8).
			Description("Each rollout in progress: what it waits on now, the reason (as kubedeploy rollout watch gives it) and for how long.").
			Unit("s").
			WithTarget(query(`max by (namespace, deployment, waiting_on, reason) (kubedeploy_deployment_rollout_waiting_seconds{`+ns+`})`, "").
				Format(prometheus.PromQueryFormatTable).Instant())).
		WithPanel(timeseries.NewPanelBuilder().Title("Time waited, by what").Span(12).Height(8).
			Description("Seconds the rollouts in progress have waited on each thing so far (scheduling, image_pull, startup, min_ready_seconds, termination, paused, partition, rollout_step, invalid_policy, controller).").
			Unit("s").Min(0).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
			WithTarget(query(`sum by (waiting_on) (kubedeploy_deployment_rollout_waited_seconds{`+ns+`})`, "{{waiting_on}}"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Unavailable pods, by reason").Span(12).Height(8).
			Description("Pods of Deployments that are not available, by the reason kubedeploy rollout watch gives.").
			Unit("short").Min(0).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
			WithTarget(query(`sum by (reason) (kubedeploy_deployment_unavailable_pods{`+ns+`})`, "{{reason}}"))).
		WithRow(dashboard.NewRowBuilder("Shadow check (kubedeploy observe)")).
		WithPanel(timeseries.NewPanelBuilder().Title("Divergences, by kind").Span(12).Height(6).
			Description("Writes kubedeploy's controllers would make at settled Deployments where the live controller makes none (expected: none); kubedeploy observe --once names them. All namespaces.").
			Unit("short").Min(0).
			WithTarget(query(`sum by (kind) (increase(kubedeploy_shadow_divergences_total[$__rate_interval]))`, "{{kind}}"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Bound violations and checks").Span(12).Height(6).
			Description("The live controller's ReplicaSet writes past a rolling-update bound (surge, availability; partition: kubedeploy.io/rollout-partition, which upstream ignores), and the shadow checks run (settled: synced).").
			Unit("short").Min(0).
			WithTarget(query(`sum by (bound) (increase(kubedeploy_shadow_bound_violations_total[$__rate_interval]))`, "{{bound}}")).
			WithTarget(query(`sum by (settled) (increase(kubedeploy_shadow_checks_total[$__rate_interval]))`, "checks settled={{settled}}"))).
		Build()
}
