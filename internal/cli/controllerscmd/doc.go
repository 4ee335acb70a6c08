// Package controllerscmd is the `controllers` command: kubedeploy's Deployment and ReplicaSet controllers against
// an existing cluster, with leader election, health checks and metrics (internal/manager). Its flags, their
// validation and its run function are the one definition that both `kubedeploy controllers` (internal/cli) and
// the controllers-only binary cmd/kubedeploy-controllers use.
//
// It must never import internal/controlplane, k8s.io/kubernetes, etcd, KWOK or kubectl, directly or through
// another package: cmd/kubedeploy-controllers, the binary that runs in a cluster, links exactly this package's
// dependencies, and its test (cmd/kubedeploy-controllers) fails if any of those modules appears among them.
package controllerscmd
