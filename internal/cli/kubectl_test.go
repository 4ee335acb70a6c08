package cli

import (
	"reflect"
	"testing"
)

func TestKubectlArgs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		kubeconfig string
		want       []string
	}{
		{"defaults to the data dir", []string{"get", "pods"}, "", []string{"--kubeconfig=/d/kubeconfig", "get", "pods"}},
		{"KUBECONFIG wins", []string{"get", "pods"}, "/k", []string{"get", "pods"}},
		{"--kubeconfig flag wins", []string{"--kubeconfig", "/x", "get"}, "", []string{"--kubeconfig", "/x", "get"}},
		{"--kubeconfig= flag wins", []string{"get", "--kubeconfig=/x"}, "", []string{"get", "--kubeconfig=/x"}},
		{"after -- is not a flag", []string{"exec", "p", "--", "--kubeconfig=/x"}, "", []string{"--kubeconfig=/d/kubeconfig", "exec", "p", "--", "--kubeconfig=/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kubectlArgs(tc.args, tc.kubeconfig, "/d"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kubectlArgs(%v) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestDefaultDataDirFromEnv(t *testing.T) {
	t.Setenv(dataDirEnv, "/somewhere")
	if got := defaultDataDir(); got != "/somewhere" {
		t.Errorf("defaultDataDir() = %q, want /somewhere", got)
	}
}
