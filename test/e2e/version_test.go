package e2e

import (
	"debug/buildinfo"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	componentversion "k8s.io/component-base/version"
)

// moduleVersion returns the version of module path recorded in the kubedeploy binary's build information (the
// replacement's version where go.mod replaces it).
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			if dep.Replace != nil && dep.Replace.Version != "" {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	t.Fatalf("%s's build information does not name %s", binary, path)
	return ""
}

// TestVersion: `kubedeploy version` names the Kubernetes release kubedeploy embeds; `up` serves that release at
// /version, with its major and minor, which are component-base's binary version; and `kubedeploy kubectl version`
// exits 0 reporting the kubectl release it bundles and the server's, without a version skew warning (issue 9).
func TestVersion(t *testing.T) {
	skipShort(t)
	release := moduleVersion(t, "k8s.io/kubernetes")
	parsed, err := utilversion.ParseSemantic(release)
	if err != nil {
		t.Fatalf("k8s.io/kubernetes version %q: %v", release, err)
	}
	wantMajor, wantMinor := fmt.Sprint(parsed.Major()), fmt.Sprint(parsed.Minor())
	if wantMajor+"."+wantMinor != componentversion.DefaultKubeBinaryVersion {
		t.Fatalf("k8s.io/kubernetes %s does not match component-base's binary version %s", release, componentversion.DefaultKubeBinaryVersion)
	}

	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubedeploy ") || !strings.Contains(string(out), "Kubernetes "+release+",") {
		t.Errorf("kubedeploy version: %v\n%s\nwant a line naming Kubernetes %s", err, out, release)
	}

	dir := t.TempDir()
	p := startUp(t, "--data-dir", dir, "--api-port", "0")
	got, err := clientFor(t, dir).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if got.GitVersion != release || got.Major != wantMajor || got.Minor != wantMinor {
		t.Errorf("/version = %+v; want gitVersion %s, major %s, minor %s", got, release, wantMajor, wantMinor)
	}

	client := "v1." + strings.TrimPrefix(moduleVersion(t, "k8s.io/kubectl"), "v0.")
	kubectlOut := mustKubectl(t, dir, []string{"Client Version: " + client + "\n", "Server Version: " + release + "\n"}, "version")
	if strings.Contains(kubectlOut, "Warning") {
		t.Errorf("kubedeploy kubectl version warns:\n%s", kubectlOut)
	}
	p.interrupt(t)
}
