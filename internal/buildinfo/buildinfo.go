package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// VersionVariable is the variable that stamps kubedeploy's version into a build:
// go build -ldflags "-X github.com/kubedeploy/kubedeploy/internal/buildinfo.version=v1.2.3".
const VersionVariable = "github.com/kubedeploy/kubedeploy/internal/buildinfo.version"

// version is kubedeploy's version when the build stamped one (VersionVariable); empty otherwise.
var version string

// Devel is the version of a build from a source tree that the go command could not give a version, as
// runtime/debug reports it (for example `go run`, or a checkout without VCS information).
const Devel = "(devel)"

// Version returns kubedeploy's version: the -ldflags -X value if the build set one; else the main module's
// version from the build information (a release tag for `go install …@v1.2.3`, a pseudo-version such as
// v0.0.0-20260101120000-0123456789ab+dirty for `go build` in a git checkout); else "(devel)", followed by
// "+<first 12 hex digits of vcs.revision>" and ".dirty" when the build recorded them.
func Version() string {
	info, _ := debug.ReadBuildInfo() // nil without build information
	return versionOf(version, info)
}

// versionOf is Version for a given -X value and build information (nil if there is none).
func versionOf(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return Devel
	}
	if v := info.Main.Version; v != "" && v != Devel {
		return v
	}
	v := Devel
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision != "" {
		v += "+" + revision[:min(12, len(revision))]
		if modified == "true" {
			v += ".dirty"
		}
	}
	return v
}

// ModuleVersion returns the version of the module path that this binary was built with (the replacement's
// version where go.mod replaces it), and false if the binary contains no package of that module or records no
// dependencies (test binaries of packages other than main record none).
func ModuleVersion(path string) (string, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	return moduleVersionOf(info, path)
}

// moduleVersionOf is ModuleVersion for given build information.
func moduleVersionOf(info *debug.BuildInfo, path string) (string, bool) {
	for _, dep := range info.Deps {
		if dep.Path != path {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version != "" {
			return dep.Replace.Version, true
		}
		return dep.Version, dep.Version != ""
	}
	return "", false
}

// Summary returns the one-line version report of the named program: its Version, the Kubernetes release it
// embeds when it links k8s.io/kubernetes (the embedded control plane), the client-go version, the Go version and
// the platform, for example
// "kubedeploy v1.2.3 (Kubernetes v1.36.3, client-go v0.36.3, go1.26.8, linux/amd64)".
func Summary(program string) string {
	parts := make([]string, 0, 4)
	if v, ok := ModuleVersion("k8s.io/kubernetes"); ok {
		parts = append(parts, "Kubernetes "+v)
	}
	if v, ok := ModuleVersion("k8s.io/client-go"); ok {
		parts = append(parts, "client-go "+v)
	}
	parts = append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("%s %s (%s)", program, Version(), strings.Join(parts, ", "))
}

// The Kubernetes release whose API kubedeploy is compiled against: k8s.io/api v0.<APIMinor>.x is Kubernetes
// v<APIMajor>.<APIMinor>. TestAPIVersionMatchesGoMod keeps it equal to go.mod's k8s.io/api.
const (
	APIMajor = 1
	APIMinor = 36
)

// KubernetesVersion returns the Kubernetes release kubedeploy's compiled API is, as "v1.36": the newest whose
// fields it knows (IM-8).
func KubernetesVersion() string { return fmt.Sprintf("v%d.%d", APIMajor, APIMinor) }
