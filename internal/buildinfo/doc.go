// Package buildinfo says which version of kubedeploy, and of the Kubernetes modules it was built with, the
// running binary is: from -ldflags -X when the build set it, else from the Go module build information that
// every `go build`, `go install` and `go run` records (runtime/debug.ReadBuildInfo).
//
// To stamp a release (VersionVariable names the variable):
//
//	go build -ldflags "-X github.com/kubedeploy/kubedeploy/internal/buildinfo.version=v1.2.3" ./cmd/...
//
// It owns version strings only. It must never import anything but the standard library, so that every binary
// (including the controllers-only one) can use it without linking anything else.
package buildinfo
