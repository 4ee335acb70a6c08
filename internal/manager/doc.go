// Package manager runs a set of kubedeploy controllers against one API server:
// it builds one client per controller (user agent and field manager
// "kubedeploy-<controller>-controller", so our writes are recognisable in
// metadata.managedFields), one shared informer factory, one event broadcaster
// per controller (event source "deployment-controller" /
// "replicaset-controller", as upstream's, CM-8), and the workers; optionally
// leader election on a Lease (CM-7, released on graceful stop) and an HTTPS
// endpoint for /healthz, /readyz, /livez and /metrics with authentication and
// authorization delegated to the API server, as kube-controller-manager's;
// and a probe of the API server that, while it is unreachable, logs so
// (rate-limited) and fails the "apiserver-connection" check of /readyz. Its
// metrics: sync durations, the rollout metrics of internal/rolloutmetrics
// (issue 25) fed from the shared caches, and, read from those caches at
// scrape time, kubedeploy_deployment_unavailable_pods (issue 11).
//
// It owns the process-level plumbing only. It must never contain controller
// decisions, and it must not know whether the API server is the embedded one
// or a real cluster: `kubedeploy up` and `kubedeploy controllers` both use it.
package manager
