package cli

import (
	"reflect"
	"testing"
)

// TestTryHints: up's hints are runnable as printed in another shell: KUBECONFIG exported when the data dir is not
// the default, the command that runs this kubedeploy, the example's absolute path or, without it, a command that
// needs no file (issue 33).
func TestTryHints(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    tryHints
		want []string
	}{
		{"default data dir, installed", tryHints{command: "kubedeploy", kubeconfig: "/root/.kubedeploy/kubeconfig", example: "/src/kubedeploy/examples/nginx-deployment.yaml"},
			[]string{"kubedeploy kubectl apply -f /src/kubedeploy/examples/nginx-deployment.yaml", "(or any kubectl with KUBECONFIG=/root/.kubedeploy/kubeconfig)"}},
		{"other data dir, go run", tryHints{command: "go run ./cmd/kubedeploy", kubeconfig: "/tmp/kd/kubeconfig", export: true, example: "/src/kubedeploy/examples/nginx-deployment.yaml"},
			[]string{"export KUBECONFIG=/tmp/kd/kubeconfig", "go run ./cmd/kubedeploy kubectl apply -f /src/kubedeploy/examples/nginx-deployment.yaml", "(after the export, any kubectl works too)"}},
		{"spaces, not installed, no example", tryHints{command: "'/opt/my tools/kubedeploy'", kubeconfig: "/tmp/my kd/kubeconfig", export: true},
			[]string{"export KUBECONFIG='/tmp/my kd/kubeconfig'", "'/opt/my tools/kubedeploy' kubectl create deployment nginx-deployment --image=nginx:1.9 --replicas=20", "(after the export, any kubectl works too)"}},
		// Issue 44: with --controllers= nothing would perform the rollout the other hints start.
		{"no controllers of its own", tryHints{command: "kubedeploy", kubeconfig: "/tmp/my kd/kubeconfig", export: true, example: "/src/kubedeploy/examples/nginx-deployment.yaml", noControllers: true},
			[]string{"kubedeploy controllers --kubeconfig '/tmp/my kd/kubeconfig'",
				"(in another shell: up runs no Deployment or ReplicaSet controller, so nothing rolls out until one runs against it;",
				"the pods of deploy/ or of the Helm chart installed here are simulated and run nothing)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.lines(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lines:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

func TestNeedsExport(t *testing.T) {
	const def = "/root/.kubedeploy/kubeconfig"
	for _, tc := range []struct {
		kubeconfig, env string
		want            bool
	}{
		{def, "", false},
		{def, def, false},
		{def, "/root/.kube/config", true}, // the commands would read KUBECONFIG's file first
		{"/tmp/kd/kubeconfig", "", true},
		{"/tmp/kd/kubeconfig", "/tmp/kd/kubeconfig", true}, // another shell may not have it
	} {
		if got := needsExport(tc.kubeconfig, def, tc.env); got != tc.want {
			t.Errorf("needsExport(%q, KUBECONFIG=%q) = %v, want %v", tc.kubeconfig, tc.env, got, tc.want)
		}
	}
}

func TestCommandPrefix(t *testing.T) {
	for _, tc := range []struct {
		name, exe, onPath, want string
	}{
		{"installed: the same binary on PATH", "/root/go/bin/kubedeploy", "/root/go/bin/kubedeploy", "kubedeploy"},
		{"another kubedeploy on PATH", "/tmp/kd", "/usr/local/bin/kubedeploy", "/tmp/kd"},
		{"none on PATH", "/work/bin/kubedeploy", "", "/work/bin/kubedeploy"},
		{"go run", "/tmp/go-build2271918464/b001/exe/kubedeploy", "/root/go/bin/kubedeploy", "go run ./cmd/kubedeploy"},
		{"go run with GOTMPDIR", "/var/cache/gotmp/go-build42/b001/exe/kubedeploy", "", "go run ./cmd/kubedeploy"},
		{"a directory named exe is not go run's", "/opt/exe/kubedeploy", "", "/opt/exe/kubedeploy"},
		{"path with a space", "/opt/my tools/kubedeploy", "", "'/opt/my tools/kubedeploy'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandPrefix(tc.exe, tc.onPath); got != tc.want {
				t.Errorf("commandPrefix(%q, %q) = %q, want %q", tc.exe, tc.onPath, got, tc.want)
			}
		})
	}
}
