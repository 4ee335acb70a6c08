// Package analysis is the measurement engine of EX-6 (issue 47): it reads analysis templates (ConfigMaps
// labelled TemplateLabel, a YAML list of metrics under MetricsKey, Argo Rollouts' field names), renders a
// metric's Prometheus query, runs it as an instant query against an allowed Prometheus or counts the new
// ReplicaSet's pods, and classifies the result with the metric's CEL conditions into one Measurement:
// Successful, Failed, Inconclusive or Error.
//
// It owns one measurement and nothing around it: when to measure, how many measurements a metric has left,
// whether an analysis as a whole passed or failed, the state recorded on the Deployment, events and metrics
// belong to the Deployment controller (internal/controller/deployment) and the rollout vocabulary
// (internal/controller/rolloutstate).
//
// It must never call the API server (the caller passes the ConfigMaps and the pods from its informer caches),
// never query an address the operator did not allow (Prometheus.Address: SSRF), never read the clock for a
// decision, and never turn missing, empty or errored data into a Successful measurement (argo-rollouts#4479,
// #1466, #1329). It imports no other kubedeploy package, so that rolloutstate and the controllers may import
// it.
package analysis
