package controlplane

import (
	"strconv"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

// kubernetesModule is the module whose version is the Kubernetes release of the embedded control plane.
const kubernetesModule = "k8s.io/kubernetes"

// servedVersion is kube-apiserver's EffectiveVersion, except that Info, which kube-apiserver serves at /version,
// names a Kubernetes release. kube-apiserver takes /version's gitVersion from k8s.io/component-base/version,
// which only -ldflags -X can set (its runtime setter accepts the compiled-in v0.0.0 only), so a go build of
// kubedeploy would serve "v0.0.0-master+$Format:%H$", which kubectl cannot parse: `kubectl version` exits 1.
// Binary, emulation and compatibility versions, which decide APIs and features, are the embedded one's.
type servedVersion struct {
	basecompatibility.EffectiveVersion
	gitVersion, major, minor string
}

// Info returns the embedded EffectiveVersion's Info with the release's gitVersion, major and minor, and no
// gitCommit (the module version names none; component-base's is the placeholder "$Format:%H$").
func (v servedVersion) Info() *apimachineryversion.Info {
	info := v.EffectiveVersion.Info()
	if info == nil {
		return nil
	}
	info.GitVersion, info.Major, info.Minor, info.GitCommit = v.gitVersion, v.major, v.minor, ""
	return info
}

// withRelease returns ev serving release (a Kubernetes version such as "v1.36.3") at /version, or ev unchanged
// if release is not a semantic version.
func withRelease(ev basecompatibility.EffectiveVersion, release string) basecompatibility.EffectiveVersion {
	v, err := utilversion.ParseSemantic(release)
	if err != nil {
		return ev
	}
	return servedVersion{
		EffectiveVersion: ev,
		gitVersion:       release,
		major:            strconv.FormatUint(uint64(v.Major()), 10),
		minor:            strconv.FormatUint(uint64(v.Minor()), 10),
	}
}

// kubernetesRelease returns the version of k8s.io/kubernetes this binary was built with (for example
// "v1.36.3"), and false if the build information does not name it (as in test binaries of packages other than
// main, which record no dependencies).
func kubernetesRelease() (string, bool) {
	return buildinfo.ModuleVersion(kubernetesModule)
}

// serveRelease makes every server of kube-apiserver's chain (aggregator, kube-apiserver, apiextensions; the
// aggregator answers /version first) serve release at /version. It must run before the chain is created, which
// reads Info once.
func serveRelease(config *app.Config, release string) {
	for _, c := range []*genericapiserver.Config{
		&config.Aggregator.GenericConfig.Config,
		config.KubeAPIs.ControlPlane.Generic,
		&config.ApiExtensions.GenericConfig.Config,
	} {
		c.EffectiveVersion = withRelease(c.EffectiveVersion, release)
	}
}
