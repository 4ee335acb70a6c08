package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// exampleManifest is the Deployment up's hint applies, relative to the repository root.
const exampleManifest = "examples/nginx-deployment.yaml"

// tryHints is what up's banner suggests running next, from a shell other than up's: each line runnable as
// printed, whichever the data dir and however this kubedeploy was started.
type tryHints struct {
	// command runs this kubedeploy (commandPrefix).
	command string
	// kubeconfig is the admin kubeconfig's absolute path.
	kubeconfig string
	// export is whether the commands need KUBECONFIG exported to find kubeconfig (needsExport).
	export bool
	// example is exampleManifest's absolute path, or "" when it is not found (not run from the repository).
	example string
	// noControllers is set when up runs no controllers of its own (--controllers=): nothing rolls a Deployment
	// out until controllers run against the cluster.
	noControllers bool
}

// lines returns the banner's "try:" lines, without indentation: `export KUBECONFIG=…` when export is set, the
// command that creates the example Deployment, and how any kubectl reaches the cluster; with noControllers,
// how to run kubedeploy's controllers against the cluster instead, and why. Paths are quoted for the shell where
// they need it.
func (h tryHints) lines() []string {
	if h.noControllers {
		return []string{h.command + " controllers --kubeconfig " + shellQuote(h.kubeconfig),
			"(in another shell: up runs no Deployment or ReplicaSet controller, so nothing rolls out until one runs against it;",
			"the pods of deploy/ or of the Helm chart installed here are simulated and run nothing)"}
	}
	create := h.command + " kubectl apply -f " + shellQuote(h.example)
	if h.example == "" {
		create = h.command + " kubectl create deployment nginx-deployment --image=nginx:1.9 --replicas=20"
	}
	if !h.export {
		return []string{create, "(or any kubectl with KUBECONFIG=" + shellQuote(h.kubeconfig) + ")"}
	}
	return []string{"export KUBECONFIG=" + shellQuote(h.kubeconfig), create, "(after the export, any kubectl works too)"}
}

// needsExport reports whether the kubedeploy commands of a new shell would miss kubeconfig by default: it is
// not in the default data dir (defaultKubeconfig, ~/.kubedeploy/kubeconfig: another shell may not have up's
// --data-dir or KUBEDEPLOY_DATA_DIR), or up's environment has a KUBECONFIG naming another file, which the
// commands would read first.
func needsExport(kubeconfig, defaultKubeconfig, kubeconfigEnv string) bool {
	return kubeconfig != defaultKubeconfig || (kubeconfigEnv != "" && kubeconfigEnv != kubeconfig)
}

// commandPrefix returns how a shell runs this kubedeploy, given the running executable's path and the path
// "kubedeploy" resolves to on $PATH ("" when it does not), both with symlinks resolved: "kubedeploy" when they
// are the same file; "go run ./cmd/kubedeploy" when the executable is one `go run` built in its temporary
// directory (gone when it exits); else the executable's path, quoted for the shell.
func commandPrefix(exe, onPath string) string {
	switch {
	case exe != "" && exe == onPath:
		return "kubedeploy"
	case isGoRunBuild(exe):
		return "go run ./cmd/kubedeploy"
	}
	return shellQuote(exe)
}

// isGoRunBuild reports whether path is a binary the go command built for `go run`:
// <GOTMPDIR or TMPDIR>/go-build<N>/b<NNN>/exe/<name>.
func isGoRunBuild(path string) bool {
	exeDir := filepath.Dir(path)
	return filepath.Base(exeDir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(exeDir))), "go-build")
}

// newTryHints returns up's hints for the cluster whose admin kubeconfig is kubeconfig, whose up runs controllers
// of its own or not (controllers), from this process: its executable, $PATH, $KUBECONFIG, the home directory
// and the working directory.
func newTryHints(kubeconfig string, controllers bool) tryHints {
	h := tryHints{kubeconfig: absolute(kubeconfig), noControllers: !controllers}
	home, _ := os.UserHomeDir()
	h.export = needsExport(h.kubeconfig, filepath.Join(dataDirFrom("", home), "kubeconfig"), os.Getenv("KUBECONFIG"))
	exe, _ := os.Executable()
	onPath, err := exec.LookPath("kubedeploy")
	if err != nil {
		onPath = ""
	}
	h.command = commandPrefix(resolved(exe), resolved(onPath))
	if _, err := os.Stat(exampleManifest); err == nil {
		h.example = absolute(exampleManifest)
	}
	return h
}

// absolute returns path made absolute, or as it is if that fails.
func absolute(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// resolved returns path, absolute and with symlinks resolved; "" for "" or a path that does not resolve.
func resolved(path string) string {
	if path == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(absolute(path))
	if err != nil {
		return ""
	}
	return r
}
