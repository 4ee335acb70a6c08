package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
)

// TestServerVersionSkew (IM-8): a kubedeploy compiled against 1.36 accepts servers from 1.35 on, newer ones
// included (skew > 0); it reads the emulated version first, then major and minor (with "+"), then gitVersion (with
// distribution suffixes), names an unstamped build by its major and minor, refuses an older server or another
// major version with the reason, and only reports a version it cannot read.
func TestServerVersionSkew(t *testing.T) {
	for _, tc := range []struct {
		info     version.Info
		name     string
		skew     int
		refusal  string
		parseErr bool
	}{
		{info: version.Info{GitVersion: "v1.36.3", Major: "1", Minor: "36"}, name: "v1.36.3", skew: 0},
		{info: version.Info{GitVersion: "v1.37.0"}, name: "v1.37.0", skew: 1},
		{info: version.Info{GitVersion: "v1.39.1-eks-1a2b3c", Major: "1", Minor: "39+"}, name: "v1.39.1-eks-1a2b3c", skew: 3},
		{info: version.Info{GitVersion: "v1.35.9-gke.1200"}, name: "v1.35.9-gke.1200", skew: -1},
		{info: version.Info{GitVersion: "v0.0.0-master+$Format:%H$", Major: "1", Minor: "36"}, name: "v1.36", skew: 0},
		{info: version.Info{GitVersion: "v1.37.1", Major: "1", Minor: "37", EmulationMajor: "1", EmulationMinor: "36"}, name: "v1.37.1", skew: 0},
		{info: version.Info{GitVersion: "v1.34.2"}, skew: -2, refusal: "supports API servers v1.35 and newer"},
		{info: version.Info{GitVersion: "v2.0.0"}, refusal: "major version 2"},
		{info: version.Info{GitVersion: "weird", Major: "x"}, parseErr: true},
		{info: version.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, parseErr: true},
	} {
		v, err := parseServerVersion(&tc.info)
		if tc.parseErr {
			if err == nil || !strings.Contains(err.Error(), "cannot read") {
				t.Errorf("%+v: err %v, want one saying the version cannot be read", tc.info, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc.info, err)
			continue
		}
		skew, refused := v.skewAgainst(1, 36)
		switch {
		case tc.refusal != "":
			if refused == nil || !strings.Contains(refused.Error(), tc.refusal) {
				t.Errorf("%+v: refused %v, want a refusal containing %q", tc.info, refused, tc.refusal)
			}
		case refused != nil || skew != tc.skew || v.name != tc.name:
			t.Errorf("%+v: %s, skew %d, refused %v; want %s, %d, nil", tc.info, v.name, skew, refused, tc.name, tc.skew)
		}
	}
}

// TestSkewReporter: the reporter sets kubedeploy_api_server_version_skew and logs once per server version (a
// reconnect to the same server says nothing new), passes on read errors, and returns the refusal of a too-old server
// every time.
func TestSkewReporter(t *testing.T) {
	registerMetrics()
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(context.Background(), logger)
	minor := func(m int) *version.Info {
		v := version.Info{GitVersion: fmt.Sprintf("v1.%d.0", m)}
		return &v
	}
	var info *version.Info
	var readErr error
	r := &skewReporter{serverVersion: func(context.Context) (*version.Info, error) { return info, readErr }}

	info = minor(buildinfo.APIMinor + 1)
	if refused, err := r.check(ctx); refused != nil || err != nil {
		t.Fatalf("newer server: %v, %v", refused, err)
	}
	want := `
# HELP kubedeploy_api_server_version_skew [ALPHA] Minor versions by which the API server (label server_version) is newer than the Kubernetes API kubedeploy is compiled against (label compiled_version); negative when it is older. Pod template fields kubedeploy does not know are carried through unchanged.
# TYPE kubedeploy_api_server_version_skew gauge
kubedeploy_api_server_version_skew{compiled_version="` + buildinfo.KubernetesVersion() + `",server_version="` + info.GitVersion + `"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "kubedeploy_api_server_version_skew"); err != nil {
		t.Error(err)
	}
	if r.reported != info.GitVersion {
		t.Errorf("reported = %q", r.reported)
	}

	readErr = errors.New("connection refused")
	if refused, err := r.check(ctx); refused != nil || err == nil {
		t.Errorf("unreachable server: %v, %v; want nil, an error", refused, err)
	}

	readErr, info = nil, minor(buildinfo.APIMinor-2)
	for range 2 {
		if refused, err := r.check(ctx); refused == nil || err != nil {
			t.Errorf("server two minors older: %v, %v; want a refusal", refused, err)
		}
	}
	want = strings.Replace(want, fmt.Sprintf(`server_version="v1.%d.0"} 1`, buildinfo.APIMinor+1), fmt.Sprintf(`server_version="v1.%d.0"} -2`, buildinfo.APIMinor-2), 1)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "kubedeploy_api_server_version_skew"); err != nil {
		t.Errorf("after the server changed version, only its series is left: %v", err)
	}
}
