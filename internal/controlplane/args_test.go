package controlplane

import (
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

func TestControllerManagerControllers(t *testing.T) {
	got := controllerManagerControllers()
	for _, forbidden := range []string{"deployment", "deployment-controller", "replicaset", "replicaset-controller", "*"} {
		if slices.Contains(got, forbidden) {
			t.Errorf("controllers %v contain forbidden %q", got, forbidden)
		}
	}
	for _, c := range got {
		if strings.Contains(c, "deployment") || strings.Contains(c, "replicaset") || strings.HasPrefix(c, "-") {
			t.Errorf("controller %q must not be started or be a negation", c)
		}
	}
	for _, want := range []string{"garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
		"serviceaccount-token-controller", "root-ca-certificate-publisher-controller", "pod-garbage-collector-controller"} {
		if !slices.Contains(got, want) {
			t.Errorf("controllers %v lack %q", got, want)
		}
	}
}

func TestControllerManagerArgs(t *testing.T) {
	args := controllerManagerArgs(controllerManagerParams{kubeconfig: "/d/pki/kcm.kubeconfig", caFile: "/d/pki/ca.crt", saKeyFile: "/d/pki/sa.key"})
	assertFlags(t, args, map[string]string{
		"kubeconfig":                       "/d/pki/kcm.kubeconfig",
		"controllers":                      strings.Join(controllerManagerControllers(), ","),
		"leader-elect":                     "false",
		"use-service-account-credentials":  "true",
		"service-account-private-key-file": "/d/pki/sa.key",
		"root-ca-file":                     "/d/pki/ca.crt",
		"secure-port":                      "0",
	})
}

func TestSchedulerArgs(t *testing.T) {
	assertFlags(t, schedulerArgs("/d/pki/scheduler.kubeconfig"), map[string]string{
		"kubeconfig":   "/d/pki/scheduler.kubeconfig",
		"leader-elect": "false",
		"secure-port":  "0",
	})
}

func TestEtcdConfig(t *testing.T) {
	cfg := etcdConfig("/d/etcd", "/d/logs/etcd.log", 41000, 41001)
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
	if cfg.LogLevel != "warn" || !slices.Equal(cfg.LogOutputs, []string{"/d/logs/etcd.log"}) {
		t.Errorf("etcd logging = %s to %v, want warn to the log file", cfg.LogLevel, cfg.LogOutputs)
	}
}
