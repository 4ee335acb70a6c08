package rollout

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// examplesDir is the repository's examples/, from this package's directory.
const examplesDir = "../../../examples/"

// exampleCommands returns the commands of a cobra Example: its lines joined
// where one ends in a backslash, split at "&&", each as its words from
// "kubedeploy" on (the program's name left out). The examples quote nothing.
func exampleCommands(example string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.ReplaceAll(example, "\\\n", " "), "\n") {
		for _, cmd := range strings.Split(line, "&&") {
			words := strings.Fields(cmd)
			if i := slices.Index(words, "kubedeploy"); i >= 0 {
				out = append(out, words[i+1:])
			}
		}
	}
	return out
}

// exampleDeployment reads the Deployment newcomers try the commands on.
func exampleDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(examplesDir + "nginx-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(b, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// exampleNames returns the Deployment names (deploy/NAME), the containers
// that images are set on (--image C=IMAGE, or kubectl set image's C=IMAGE)
// and the files (-f) a command names.
func exampleNames(words []string) (deployments, containers, files []string) {
	setImage := len(words) > 2 && words[0] == "kubectl" && words[1] == "set" && words[2] == "image"
	for i, w := range words {
		next := ""
		if i+1 < len(words) {
			next = words[i+1]
		}
		switch {
		case strings.HasPrefix(w, "deploy/"):
			deployments = append(deployments, strings.TrimPrefix(w, "deploy/"))
		case w == "--image":
			containers = append(containers, strings.SplitN(next, "=", 2)[0])
		case strings.HasPrefix(w, "--image="):
			containers = append(containers, strings.SplitN(strings.TrimPrefix(w, "--image="), "=", 2)[0])
		case w == "-f" || w == "--filename":
			files = append(files, next)
		case setImage && i > 3 && !strings.HasPrefix(w, "-") && strings.Contains(w, "="):
			containers = append(containers, strings.SplitN(w, "=", 2)[0])
		}
	}
	return deployments, containers, files
}

// Issue 33: every example of `rollout watch --help` and `rollout plan
// --help` names the Deployment and the container of
// examples/nginx-deployment.yaml, and only files of examples/, so that a
// newcomer who applied it can paste them. The plan examples that need no
// cluster (--local) are run.
func TestHelpExamplesUseTheShippedExample(t *testing.T) {
	d := exampleDeployment(t)
	var containers []string
	for _, c := range d.Spec.Template.Spec.Containers {
		containers = append(containers, c.Name)
	}
	root := NewCommand(Options{})
	for _, name := range []string{"watch", "plan"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		commands := exampleCommands(cmd.Example)
		if len(commands) == 0 {
			t.Errorf("rollout %s --help has no example", name)
		}
		for _, words := range commands {
			example := strings.Join(words, " ")
			deployments, cs, files := exampleNames(words)
			for _, n := range deployments {
				if n != d.Name {
					t.Errorf("%q: deploy/%s, but the example Deployment is %s", example, n, d.Name)
				}
			}
			for _, c := range cs {
				if c != "*" && !slices.Contains(containers, c) {
					t.Errorf("%q: container %q, but the example Deployment's are %v", example, c, containers)
				}
			}
			for _, f := range files {
				if path.Dir(f) != "examples" {
					t.Errorf("%q: -f %s is not a file of examples/", example, f)
				} else if _, err := os.Stat(examplesDir + path.Base(f)); err != nil {
					t.Errorf("%q: %v", example, err)
				}
			}
			if len(words) > 2 && words[0] == "rollout" && words[1] == "plan" && slices.Contains(words, "--local") {
				runLocalPlanExample(t, example, words[2:])
			}
		}
	}
}

// runLocalPlanExample runs `rollout plan args` with examples/ read from
// this package's directory, and checks that it plans the example Deployment.
func runLocalPlanExample(t *testing.T, example string, args []string) {
	t.Helper()
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, "examples/") {
			args[i] = examplesDir + strings.TrimPrefix(a, "examples/")
		}
	}
	out, err := runPlan(t, args...)
	if err != nil {
		t.Errorf("%q: %v\n%s", example, err, out)
	} else if !strings.Contains(out, "deployment/nginx-deployment:") && !strings.Contains(out, `"deployment": "nginx-deployment"`) {
		t.Errorf("%q does not plan nginx-deployment:\n%s", example, out)
	}
}
