// Package upstreame2e names upstream Kubernetes' end-to-end test suite at the k8s.io/kubernetes version kubedeploy
// embeds, for test/conformance, which builds its binary with `go test -c` and runs the Deployment and ReplicaSet
// specs against `kubedeploy up`. It lives under internal/controlplane because only that tree may depend on
// k8s.io/kubernetes; its one ordinary file links nothing, and pin.go (build tag conformance, never built) keeps the
// suite's modules in go.mod and go.sum.
package upstreame2e

// Package is the import path of upstream's end-to-end suite; `go test -c Package` builds the e2e binary from the
// k8s.io/kubernetes version in go.mod.
const Package = "k8s.io/kubernetes/test/e2e"
