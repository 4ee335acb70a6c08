// Package manager runs kubedeploy controllers against one API server.
//
// Each controller it can run is declared once in a table (controllers.go, type Controller): its
// kube-controller-manager name, the informers it reads (and those it can run without, such as the ReplicaSet
// controller's node informer when the cluster's RBAC predates it), where deploy/ grants its RBAC, its worker
// count, how it is built from shared inputs, and the metrics that run only beside it. KnownControllers,
// ValidateControllers and ParseControllers (the --controllers flag) derive from the table.
//
// A ControllerSet (set.go) is the configured controllers over one shared informer factory (pods slimmed by
// podcache.Transform, rawtemplate's store, resync jittered from 12 h, protobuf clients): one client per
// controller (user agent and field manager "kubedeploy-<controller>-controller", so our writes are
// recognisable in metadata.managedFields; one rate limiter for its typed and JSON clients), one event
// broadcaster per controller (event source "deployment-controller" / "replicaset-controller", as upstream's,
// CM-8) and the workers. It starts and stops as one value, so that a process can run several.
//
// In sharded mode (sharded.go, shardedset.go, buckets.go) a replica runs one ControllerSet for its whole life,
// over union informers (internal/informerunion) whose members are its buckets' own informers: a bucket won adds
// its informers and, once they have synced, its namespaces to the controllers' runner.Scope; a bucket given up
// is dropped from the scope, drained and removed, and no other bucket stops or lists again (SH-3, SH-9).
//
// Run adds the process around a set: optionally leader election on a Lease (CM-7, released on graceful stop);
// health and metrics served by internal/serving (HTTPS with delegated authentication and authorization, or
// plain HTTP in observe mode); a probe of the API server that, while it is unreachable, logs so
// (rate-limited) and fails the "apiserver-connection" check of /readyz; and the server's version checked at
// start and on reconnect (IM-8). Its own metrics: sync durations (metrics.go), the version skew and the
// unsupported-fields gauge (skew.go); it points the rollout metrics and kubedeploy_deployment_unavailable_pods
// (internal/rolloutmetrics) at a set's informers while the Deployment controller runs, or at observe mode's.
//
// It owns the process-level plumbing only. It must never contain controller decisions, nor serving or
// authentication code, and it must not know whether the API server is the embedded one or a real cluster:
// `kubedeploy up` and `kubedeploy controllers` both use it.
package manager
