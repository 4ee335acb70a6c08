package cli

import (
	"fmt"
	"strconv"
	"strings"
	_ "unsafe" // for go:linkname

	utilversion "k8s.io/apimachinery/pkg/util/version"
	componentversion "k8s.io/component-base/version"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

// kubectl reports its own version from k8s.io/component-base/version, whose variables Kubernetes' release builds
// set with -ldflags -X and which have no setter: version.SetDynamicVersion accepts only the compiled-in
// major.minor.patch, which is the placeholder v0.0.0 in any build without those ldflags (go build, go run, go
// install). Without a real version, `kubectl version` fails parsing its own "v0.0.0-master+$Format:%H$". So the
// `kubectl` command links to those variables, as the ldflags would. If component-base renames them, the build
// fails at link time.
var (
	//go:linkname componentGitVersion k8s.io/component-base/version.gitVersion
	componentGitVersion string
	//go:linkname componentGitMajor k8s.io/component-base/version.gitMajor
	componentGitMajor string
	//go:linkname componentGitMinor k8s.io/component-base/version.gitMinor
	componentGitMinor string
	//go:linkname componentGitCommit k8s.io/component-base/version.gitCommit
	componentGitCommit string
)

// kubectlRelease returns the Kubernetes release of the k8s.io/kubectl module version v, with its major and
// minor numbers ("v0.36.3" is kubectl "v1.36.3", "1", "36": Kubernetes publishes its staging modules as
// v0.<minor>.<patch>), and false if v is not such a version.
func kubectlRelease(v string) (gitVersion, major, minor string, ok bool) {
	rest, ok := strings.CutPrefix(v, "v0.")
	if !ok {
		return "", "", "", false
	}
	gitVersion = "v1." + rest
	release, err := utilversion.ParseSemantic(gitVersion)
	if err != nil {
		return "", "", "", false
	}
	return gitVersion, strconv.FormatUint(uint64(release.Major()), 10), strconv.FormatUint(uint64(release.Minor()), 10), true
}

// stampKubectlVersion sets component-base's version, which kubectl reports as its client version, to the
// release of the k8s.io/kubectl module this binary was built with. It changes nothing if the build information
// does not name that module. It is for the `kubectl` command's process only: it changes process-wide state.
// It returns component-base's error if that rejects the version.
func stampKubectlVersion() error {
	v, ok := buildinfo.ModuleVersion("k8s.io/kubectl")
	if !ok {
		return nil
	}
	gitVersion, major, minor, ok := kubectlRelease(v)
	if !ok {
		return nil
	}
	return stampComponentVersion(gitVersion, major, minor)
}

// stampComponentVersion sets component-base's gitVersion, gitMajor and gitMinor as -ldflags -X would, and clears
// its gitCommit (the placeholder "$Format:%H$"). It returns component-base's error if that rejects gitVersion.
func stampComponentVersion(gitVersion, major, minor string) error {
	componentGitVersion, componentGitMajor, componentGitMinor, componentGitCommit = gitVersion, major, minor, ""
	// SetDynamicVersion accepts gitVersion now that it is the compiled-in version; it makes version.Get() return it.
	if err := componentversion.SetDynamicVersion(gitVersion); err != nil {
		return fmt.Errorf("kubectl version %s: %w", gitVersion, err)
	}
	return nil
}
