// Package grafana builds kubedeploy's Grafana dashboard (kubedeploy-rollouts.json) with Grafana's own
// grafana-foundation-sdk (issue 25): rollouts ended over time by outcome, their durations, the rollouts in progress
// with what they wait on and why, the time waited by what, the Deployments' unavailable pods by reason, and the
// analyses of rollout steps (EX-6: measurements by phase, last values, runs holding rollouts), from
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
	b := dashboard.NewDashboardBuilder("kubedeploy: rollouts").
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
			Multi(true).IncludeAll(true).AllValue(".*"))
	rolloutPanels(b)
	waitPanels(b)
	analysisPanels(b)
	shadowPanels(b)
	return b.Build()
}

// ns is the dashboard's namespace filter, a PromQL label matcher.
const ns = `namespace=~"$namespace"`

// rolloutPanels adds the rollouts in progress, the rollouts ended by outcome and their durations.
func rolloutPanels(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Rollouts")).
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
			WithTarget(query(`histogram_quantile(0.9, sum by (le, outcome) (rate(kubedeploy_deployment_rollout_duration_seconds_bucket[$__rate_interval])))`, "p90 {{outcome}}")))
}

// waitPanels adds what the rollouts in progress wait on now, the time waited by what and the unavailable pods.
func waitPanels(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Rollouts in progress: what they wait on")).
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
			WithTarget(query(`sum by (reason) (kubedeploy_deployment_unavailable_pods{`+ns+`})`, "{{reason}}")))
}

// analysisPanels adds the analyses of rollout steps (EX-6): measurements by phase, the metrics' last values, and
// the runs holding rollouts (measuring, or waiting for a human).
func analysisPanels(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Analyses (rollout steps gated by measurements)")).
		WithPanel(timeseries.NewPanelBuilder().Title("Analysis measurements, by phase").Span(12).Height(8).
			Description("Measurements of each analysis metric by phase (Successful, Failed, Inconclusive, Error), from the record on the Deployment of its current revision; a new revision's analyses start the counts over.").
			Unit("short").Min(0).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
			WithTarget(query(`sum by (namespace, deployment, metric, phase) (increase(kubedeploy_analysis_measurements_total{`+ns+`}[$__rate_interval]))`, "{{namespace}}/{{deployment}} {{metric}} {{phase}}"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Analysis metrics' last values").Span(12).Height(8).
			Description("The value of each analysis metric's last measurement, when a number (a Prometheus query's result; the pods provider has none): compare it with the metric's condition in kubedeploy rollout watch.").
			Unit("short").
			WithTarget(query(`kubedeploy_analysis_last_value{`+ns+`}`, "{{namespace}}/{{deployment}} {{metric}}"))).
		WithPanel(table.NewPanelBuilder().Title("Analysis runs holding rollouts").Span(24).Height(6).
			Description("Each analysis run that holds a rollout now (run: step-N or background): Running, for how long it has measured; Inconclusive or Error, for how long it has waited for kubedeploy rollout promote (go on) or abort (roll back).").
			Unit("s").
			WithTarget(query(`max by (namespace, deployment, run, phase) (kubedeploy_analysis_run_seconds{`+ns+`})`, "").
				Format(prometheus.PromQueryFormatTable).Instant()))
}

// shadowPanels adds observe mode's shadow check: divergences, bound violations and checks.
func shadowPanels(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Shadow check (kubedeploy observe)")).
		WithPanel(timeseries.NewPanelBuilder().Title("Divergences, by kind").Span(12).Height(6).
			Description("Writes kubedeploy's controllers would make at settled Deployments where the live controller makes none (expected: none); kubedeploy observe --once names them. All namespaces.").
			Unit("short").Min(0).
			WithTarget(query(`sum by (kind) (increase(kubedeploy_shadow_divergences_total[$__rate_interval]))`, "{{kind}}"))).
		WithPanel(timeseries.NewPanelBuilder().Title("Bound violations and checks").Span(12).Height(6).
			Description("The live controller's ReplicaSet writes past a rolling-update bound (surge, availability; partition: kubedeploy.io/rollout-partition, which upstream ignores), and the shadow checks run (settled: synced).").
			Unit("short").Min(0).
			WithTarget(query(`sum by (bound) (increase(kubedeploy_shadow_bound_violations_total[$__rate_interval]))`, "{{bound}}")).
			WithTarget(query(`sum by (settled) (increase(kubedeploy_shadow_checks_total[$__rate_interval]))`, "checks settled={{settled}}")))
}
