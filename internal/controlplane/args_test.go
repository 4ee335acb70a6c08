package controlplane

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func assertFlags(t *testing.T, args []string, want map[string]string) {
	t.Helper()
	for name, v := range want {
		got, ok := flagValue(args, name)
		if !ok {
			t.Errorf("flag --%s missing from %v", name, args)
			continue
		}
		if got != v {
			t.Errorf("--%s = %q, want %q", name, got, v)
		}
	}
}

func TestAPIServerArgs(t *testing.T) {
	args := apiserverArgs(apiserverParams{
		port: 6443, etcdURL: "http://127.0.0.1:41234", caFile: "/d/pki/ca.crt",
		certFile: "/d/pki/apiserver.crt", keyFile: "/d/pki/apiserver.key",
		saKeyFile: "/d/pki/sa.key", saPubFile: "/d/pki/sa.pub", certDir: "/d/pki/gen",
	})
	assertFlags(t, args, map[string]string{
		"bind-address":                     "127.0.0.1",
		"advertise-address":                "127.0.0.1",
		"secure-port":                      "6443",
		"client-ca-file":                   "/d/pki/ca.crt",
		"tls-cert-file":                    "/d/pki/apiserver.crt",
		"tls-private-key-file":             "/d/pki/apiserver.key",
		"anonymous-auth":                   "false",
		"authorization-mode":               "Node,RBAC",
		"service-account-key-file":         "/d/pki/sa.pub",
		"service-account-signing-key-file": "/d/pki/sa.key",
		"service-account-issuer":           "https://kubernetes.default.svc.cluster.local",
		"service-cluster-ip-range":         "10.0.0.0/24",
		"etcd-servers":                     "http://127.0.0.1:41234",
	})
	// The default admission chain stays (ServiceAccount included); only the node taint plugin is off.
	for _, a := range args {
		if strings.HasPrefix(a, "--admission-control") || strings.HasPrefix(a, "--enable-admission-plugins") {
			t.Errorf("admission chain must stay default, got %s", a)
		}
	}
	if v, _ := flagValue(args, "disable-admission-plugins"); v != "TaintNodesByCondition" {
		t.Errorf("--disable-admission-plugins = %q, want only TaintNodesByCondition", v)
	}
}

func TestControllerManagerArgs(t *testing.T) {
	args := controllerManagerArgs(controllerManagerParams{kubeconfig: "/d/pki/kcm.kubeconfig", caFile: "/d/pki/ca.crt",
		caKeyFile: "/d/pki/ca.key", saKeyFile: "/d/pki/sa.key", controllers: DefaultKubeControllers()})
	assertFlags(t, args, map[string]string{
		"kubeconfig":                       "/d/pki/kcm.kubeconfig",
		"controllers":                      strings.Join(DefaultKubeControllers(), ","),
		"cluster-signing-cert-file":        "/d/pki/ca.crt",
		"cluster-signing-key-file":         "/d/pki/ca.key",
		"leader-elect":                     "false",
		"use-service-account-credentials":  "true",
		"service-account-private-key-file": "/d/pki/sa.key",
		"root-ca-file":                     "/d/pki/ca.crt",
		"secure-port":                      "0",
	})
}

// TestControllerManagerArgsRateLimit: the client rate limit is passed only when set (CM-6 defaults otherwise).
func TestControllerManagerArgsRateLimit(t *testing.T) {
	base := controllerManagerParams{kubeconfig: "/d/k", caFile: "/d/ca", saKeyFile: "/d/sa"}
	for _, a := range controllerManagerArgs(base) {
		if strings.HasPrefix(a, "--kube-api-") {
			t.Errorf("unset rate limit passed as %s", a)
		}
	}
	base.qps, base.burst = 5000, 10000
	assertFlags(t, controllerManagerArgs(base), map[string]string{"kube-api-qps": "5000", "kube-api-burst": "10000"})
}

// TestControllerManagerArgsUpstreamWorkload: the default controller list never names KCM's deployment or
// replicaset controllers; only the differential-test option adds exactly those two, on top of the generic ones.
func TestControllerManagerArgsUpstreamWorkload(t *testing.T) {
	base := controllerManagerParams{kubeconfig: "/d/k", caFile: "/d/ca", saKeyFile: "/d/sa", controllers: DefaultKubeControllers()}
	tests := []struct {
		name             string
		upstreamWorkload bool
		want             []string
	}{
		{name: "default", want: DefaultKubeControllers()},
		{name: "upstream workload controllers", upstreamWorkload: true,
			want: append(DefaultKubeControllers(), "deployment-controller", "replicaset-controller")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.upstreamWorkload = tc.upstreamWorkload
			v, _ := flagValue(controllerManagerArgs(p), "controllers")
			got := strings.Split(v, ",")
			if !slices.Equal(got, tc.want) {
				t.Errorf("--controllers = %v, want %v", got, tc.want)
			}
			for _, c := range []string{"deployment-controller", "replicaset-controller"} {
				if slices.Contains(got, c) != tc.upstreamWorkload {
					t.Errorf("--controllers contains %s = %v, want %v", c, !tc.upstreamWorkload, tc.upstreamWorkload)
				}
			}
			if err := checkControllers(got, tc.upstreamWorkload); err != nil {
				t.Errorf("checkControllers refuses our own list: %v", err)
			}
		})
	}
}

// TestCheckControllers: the refusal of KCM's workload controllers stays for normal use; the option allows exactly
// their canonical names and never "*".
func TestCheckControllers(t *testing.T) {
	tests := []struct {
		name             string
		controllers      []string
		upstreamWorkload bool
		wantErr          string
	}{
		{name: "default set", controllers: DefaultKubeControllers()},
		{name: "deployment-controller refused", controllers: []string{"namespace-controller", "deployment-controller"}, wantErr: `"deployment-controller"`},
		{name: "replicaset alias refused", controllers: []string{"replicaset"}, wantErr: `"replicaset"`},
		{name: "star refused", controllers: []string{"*"}, wantErr: `"*"`},
		{name: "option allows upstream", controllers: []string{"deployment-controller", "replicaset-controller"}, upstreamWorkload: true},
		{name: "option still refuses star", controllers: []string{"*"}, upstreamWorkload: true, wantErr: `"*"`},
		{name: "option refuses aliases", controllers: []string{"deployment"}, upstreamWorkload: true, wantErr: `"deployment"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkControllers(tc.controllers, tc.upstreamWorkload)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("checkControllers(%v, %v) = %v, want nil", tc.controllers, tc.upstreamWorkload, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("checkControllers(%v, %v) = %v, want error naming %s", tc.controllers, tc.upstreamWorkload, err, tc.wantErr)
			}
		})
	}
}

// TestUpstreamWorkloadControllersOnlyInTests keeps the differential-test option out of normal use: no non-test Go
// file of the module outside this package (so neither the CLI nor the manager) mentions it.
func TestUpstreamWorkloadControllersOnlyInTests(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var scanned int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || (path != root && strings.HasPrefix(d.Name(), ".")) || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		scanned++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "UpstreamWorkloadControllers") {
			t.Errorf("%s mentions UpstreamWorkloadControllers; only tests may set it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 10 {
		t.Fatalf("scanned only %d Go files under %s; the guard looks in the wrong place", scanned, root)
	}
}

func TestSchedulerArgs(t *testing.T) {
	assertFlags(t, schedulerArgs("/d/pki/scheduler.kubeconfig"), map[string]string{
		"kubeconfig":     "/d/pki/scheduler.kubeconfig",
		"leader-elect":   "false",
		"secure-port":    "0",
		"kube-api-qps":   "5000",
		"kube-api-burst": "10000",
	})
}

func TestEtcdConfig(t *testing.T) {
	cfg := etcdConfig("/d/etcd", io.Discard, 41000, 41001)
	if cfg.Dir != "/d/etcd" {
		t.Errorf("Dir = %q", cfg.Dir)
	}
	if got := etcdClientURL(cfg); got != "http://127.0.0.1:41000" {
		t.Errorf("client URL = %q", got)
	}
	for _, u := range append(append(cfg.ListenClientUrls, cfg.ListenPeerUrls...), cfg.AdvertisePeerUrls...) {
		if u.Hostname() != "127.0.0.1" {
			t.Errorf("etcd URL %s is not on 127.0.0.1", u.String())
		}
		if u.Port() == "2379" || u.Port() == "2380" {
			t.Errorf("etcd URL %s uses etcd's default port", u.String())
		}
	}
	if cfg.LogLevel != "error" || cfg.ZapLoggerBuilder == nil {
		t.Errorf("etcd logging = %s (builder set: %v), want error level to the given writer", cfg.LogLevel, cfg.ZapLoggerBuilder != nil)
	}
}
