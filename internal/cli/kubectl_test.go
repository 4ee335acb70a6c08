package cli

import (
	"reflect"
	"testing"

	componentversion "k8s.io/component-base/version"
)

// TestKubectlInvocation: `kubedeploy kubectl` passes kubectl its arguments as typed, but --data-dir, and the
// kubeconfig as KUBECONFIG: --data-dir's, else KUBECONFIG as it is, else the default data dir's; none when the
// arguments name one. A missing one is --kubeconfig after the arguments, for kubectl to name it (issue 44: a
// --kubeconfig put in front made kubectl's plugin lookup refuse a mistyped command with "flags cannot be placed
// before plugin name").
func TestKubectlInvocation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		kubeconfig string // the environment's KUBECONFIG
		missing    bool
		wantArgs   []string
		wantEnv    string // "" leaves KUBECONFIG as it is
	}{
		{"defaults to the data dir", []string{"get", "pods"}, "", false, []string{"get", "pods"}, "/d/kubeconfig"},
		{"a mistyped command stays first", []string{"gett", "pods"}, "", false, []string{"gett", "pods"}, "/d/kubeconfig"},
		{"a plugin's arguments stay as typed", []string{"hello", "a", "--b"}, "", false, []string{"hello", "a", "--b"}, "/d/kubeconfig"},
		{"KUBECONFIG wins", []string{"get", "pods"}, "/k", false, []string{"get", "pods"}, ""},
		{"--kubeconfig flag wins", []string{"--kubeconfig", "/x", "get"}, "", false, []string{"--kubeconfig", "/x", "get"}, ""},
		{"--kubeconfig= flag wins", []string{"get", "--kubeconfig=/x"}, "", false, []string{"get", "--kubeconfig=/x"}, ""},
		{"after -- is not a flag", []string{"exec", "p", "--", "--kubeconfig=/x"}, "", false, []string{"exec", "p", "--", "--kubeconfig=/x"}, "/d/kubeconfig"},
		{"--data-dir wins over KUBECONFIG", []string{"--data-dir", "/e", "get", "pods"}, "/k", false, []string{"get", "pods"}, "/e/kubeconfig"},
		{"--data-dir= form", []string{"get", "--data-dir=/e", "pods"}, "", false, []string{"get", "pods"}, "/e/kubeconfig"},
		{"--kubeconfig wins over --data-dir", []string{"--data-dir=/e", "--kubeconfig=/x", "get"}, "", false, []string{"--kubeconfig=/x", "get"}, ""},
		{"--data-dir after -- is kept", []string{"exec", "p", "--", "--data-dir=/e"}, "", false, []string{"exec", "p", "--", "--data-dir=/e"}, "/d/kubeconfig"},
		{"missing data dir's is named last", []string{"gett", "pods"}, "", true, []string{"gett", "pods", "--kubeconfig=/d/kubeconfig"}, ""},
		{"missing: before --", []string{"exec", "p", "--", "sh"}, "", true, []string{"exec", "p", "--kubeconfig=/d/kubeconfig", "--", "sh"}, ""},
		{"missing KUBECONFIG is named", []string{"get", "pods"}, "/k", true, []string{"get", "pods", "--kubeconfig=/k"}, ""},
		{"missing KUBECONFIG list is kubectl's", []string{"get"}, "/k:/l", true, []string{"get"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, given, rest := takeDataDir(tc.args)
			args, env := kubectlInvocation(rest, kubeconfigFrom(dir, given, tc.kubeconfig, "/d", "/home"), tc.missing)
			if !reflect.DeepEqual(args, tc.wantArgs) || env != tc.wantEnv {
				t.Errorf("kubectl %v: arguments %v, KUBECONFIG %q; want %v, %q", tc.args, args, env, tc.wantArgs, tc.wantEnv)
			}
		})
	}
}

// TestKubeconfigFrom: --data-dir, then KUBECONFIG, then KUBEDEPLOY_DATA_DIR, then ~/.kubedeploy, each saying
// what chose it.
func TestKubeconfigFrom(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		dataDir                   string
		given                     bool
		kubeconfigEnv, dataDirEnv string
		want                      kubeconfigSource
	}{
		{"default", "", false, "", "", kubeconfigSource{path: "/home/.kubedeploy/kubeconfig", dataDir: "/home/.kubedeploy", from: fromDefault}},
		{"KUBEDEPLOY_DATA_DIR", "", false, "", "/e", kubeconfigSource{path: "/e/kubeconfig", dataDir: "/e", from: fromDataDirEnv}},
		{"KUBECONFIG before KUBEDEPLOY_DATA_DIR", "", false, "/k", "/e", kubeconfigSource{path: "/k", from: fromKubeconfigEnv}},
		{"--data-dir before KUBECONFIG", "rel", true, "/k", "/e", kubeconfigSource{path: "rel/kubeconfig", dataDir: "rel", from: fromDataDirFlag}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kubeconfigFrom(tc.dataDir, tc.given, tc.kubeconfigEnv, tc.dataDirEnv, "/home"); got != tc.want {
				t.Errorf("kubeconfigFrom = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestKubeconfigMissingError: one line naming the path, the data dir and what chose them, and the ways to point
// elsewhere (issue 33).
func TestKubeconfigMissingError(t *testing.T) {
	for _, tc := range []struct {
		src  kubeconfigSource
		want string
	}{
		{kubeconfigFrom("", false, "", "", "/root"), "no kubeconfig at /root/.kubedeploy/kubeconfig (the default data dir /root/.kubedeploy): " +
			"start the cluster with `kubedeploy up`, or point elsewhere with --data-dir DIR, KUBEDEPLOY_DATA_DIR=DIR or KUBECONFIG=FILE"},
		{kubeconfigFrom("/tmp/my data", true, "", "", "/root"), "no kubeconfig at /tmp/my data/kubeconfig (data dir from --data-dir /tmp/my data): " +
			"start the cluster with `kubedeploy up --data-dir '/tmp/my data'`, or point elsewhere with --data-dir DIR, KUBEDEPLOY_DATA_DIR=DIR or KUBECONFIG=FILE"},
		{kubeconfigFrom("", false, "", "/e", "/root"), "no kubeconfig at /e/kubeconfig (data dir from KUBEDEPLOY_DATA_DIR /e): " +
			"start the cluster with `kubedeploy up --data-dir /e`, or point elsewhere with --data-dir DIR, KUBEDEPLOY_DATA_DIR=DIR or KUBECONFIG=FILE"},
		{kubeconfigFrom("", false, "/k", "/e", "/root"), "no kubeconfig at /k (from KUBECONFIG): point KUBECONFIG at one that exists, " +
			"or name the data dir of `kubedeploy up` with --data-dir DIR (or unset KUBECONFIG to use KUBEDEPLOY_DATA_DIR, else ~/.kubedeploy)"},
	} {
		if got := tc.src.missingError().Error(); got != tc.want {
			t.Errorf("missingError of %+v:\n got  %s\n want %s", tc.src, got, tc.want)
		}
	}
}

// TestKubectlError: kubectl's failure for a missing kubeconfig becomes kubedeploy's one line and exit 1; any
// other failure, or one while the kubeconfig exists, is kubectl's own.
func TestKubectlError(t *testing.T) {
	dataDir := kubeconfigFrom("/d", true, "", "", "/root")
	env := kubeconfigFrom("", false, "/k1:/k2", "", "/root")
	for _, tc := range []struct {
		name     string
		msg      string
		src      kubeconfigSource
		missing  bool
		wantKept bool
	}{
		{"stat of the data dir's kubeconfig", "error: stat /d/kubeconfig: no such file or directory", dataDir, true, false},
		{"KUBECONFIG files all missing", "The connection to the server localhost:8080 was refused - did you specify the right host or port?", env, true, false},
		{"another error", `error: the path "x.yaml" does not exist`, dataDir, true, true},
		{"kubeconfig exists", "error: stat /d/kubeconfig: permission denied", dataDir, false, true},
		{"localhost:8080 from a data dir's kubeconfig", "The connection to the server localhost:8080 was refused", dataDir, true, true},
		{"another cluster's certificate, from KUBECONFIG", "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority", env, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, code := kubectlError(tc.msg, 7, tc.src, tc.missing)
			if tc.wantKept {
				if msg != tc.msg || code != 7 {
					t.Errorf("got %q (%d), want kubectl's %q (7)", msg, code, tc.msg)
				}
				return
			}
			if want := "kubedeploy: " + tc.src.missingError().Error(); msg != want || code != 1 {
				t.Errorf("got %q (%d), want %q (1)", msg, code, want)
			}
		})
	}
}

// TestKubectlErrorAnotherCluster: kubectl's x509 error through a data dir's kubeconfig is followed by a line
// saying that another cluster answers at its address (issue 44).
func TestKubectlErrorAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, dir, "https://127.0.0.1:6443")
	kubectlMsg := "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority"
	msg, code := kubectlError(kubectlMsg, 1, kubeconfigFrom(dir, true, "", "", "/root"), false)
	want := kubectlMsg + "\nkubedeploy: the API server at https://127.0.0.1:6443 is not the cluster of data dir " + dir +
		": its certificate is not signed by that data dir's CA, so another cluster answers at that address; is `kubedeploy up --data-dir " + dir + "` running?"
	if msg != want || code != 1 {
		t.Errorf("got %q (%d), want %q (1)", msg, code, want)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/kd-1/kubeconfig": "/tmp/kd-1/kubeconfig",
		"/tmp/my data":         "'/tmp/my data'",
		"it's":                 `'it'\''s'`,
		"":                     "''",
		"$HOME/x":              "'$HOME/x'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDefaultDataDirFromEnv(t *testing.T) {
	t.Setenv(dataDirEnv, "/somewhere")
	if got := defaultDataDir(); got != "/somewhere" {
		t.Errorf("defaultDataDir() = %q, want /somewhere", got)
	}
}

func TestKubectlRelease(t *testing.T) {
	for _, tc := range []struct {
		module                string
		version, major, minor string
		ok                    bool
	}{
		{"v0.36.3", "v1.36.3", "1", "36", true},
		{"v0.37.0-alpha.1", "v1.37.0-alpha.1", "1", "37", true},
		{"v1.36.3", "", "", "", false},
		{"v0.36", "", "", "", false},
		{"(devel)", "", "", "", false},
	} {
		version, major, minor, ok := kubectlRelease(tc.module)
		if version != tc.version || major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("kubectlRelease(%q) = %q, %q, %q, %v; want %q, %q, %q, %v",
				tc.module, version, major, minor, ok, tc.version, tc.major, tc.minor, tc.ok)
		}
	}
}

// TestStampComponentVersion: after stamping, kubectl's client version (component-base's version.Get) is the
// stamped one. (Build information, and so stampKubectlVersion's k8s.io/kubectl version,
// exists in main binaries only; test/e2e checks the built binary's `kubectl version`.)
func TestStampComponentVersion(t *testing.T) {
	if err := stampComponentVersion("v1.36.3", "1", "36"); err != nil {
		t.Fatal(err)
	}
	if got := componentversion.Get(); got.GitVersion != "v1.36.3" || got.Major != "1" || got.Minor != "36" || got.GitCommit != "" {
		t.Errorf("client version after stamping v1.36.3 = %+v", got)
	}
}
