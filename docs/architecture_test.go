package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The package table of architecture.md is checked against the code (issue 44): every package of the module has a
// row, and the kubedeploy packages a row's imports column names are exactly the ones its packages import. The
// import rules that page states are checked here too.

// modulePath prefixes every kubedeploy import path.
const modulePath = "github.com/kubedeploy/kubedeploy/"

// goPackage is one package of the module as `go list` reports it.
type goPackage struct {
	// path is the import path without modulePath ("internal/manager"; "" for the module root).
	path string
	// imports are the non-test imports, full paths; testImports those of the _test.go files (both packages).
	imports, testImports []string
	// testOnly: the package has no non-test Go files (test/integration and the like).
	testOnly bool
}

// kubedeployImports returns the module's packages p imports, relative, sorted: its non-test imports, or for a
// package of tests only, its tests' imports (what its code is). p itself is left out.
func (p goPackage) kubedeployImports() []string {
	from := p.imports
	if p.testOnly {
		from = append(slices.Clone(p.testImports), p.imports...)
	}
	var out []string
	for _, imp := range from {
		if rel, ok := strings.CutPrefix(imp, modulePath); ok && rel != p.path && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

var (
	listOnce sync.Once
	listed   map[string]goPackage
	listErr  string
)

// modulePackages returns every package of the module (`go list ./...` from the module root), by relative path.
func modulePackages(t *testing.T) map[string]goPackage {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command(goCommand(), "list", "-f",
			`{{.ImportPath}}	{{len .GoFiles}}	{{join .Imports " "}}	{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = "go list: " + err.Error() + "\n" + stderr.String()
			return
		}
		listed = map[string]goPackage{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "\t")
			p := goPackage{path: strings.TrimPrefix(f[0]+"/", modulePath), testOnly: f[1] == "0",
				imports: strings.Fields(f[2]), testImports: strings.Fields(f[3])}
			p.path = strings.TrimSuffix(p.path, "/")
			listed[p.path] = p
		}
	})
	if listErr != "" {
		t.Fatal(listErr)
	}
	return listed
}

// goCommand is the go command of the toolchain running the test.
func goCommand() string {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p := goroot + "/bin/go"; fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// packageRow is one row of architecture.md's package table.
type packageRow struct {
	line int
	// packages are the first column's packages, relative paths.
	packages []string
	// imports are the kubedeploy packages the third column names; abbreviated are names there that look like a
	// kubedeploy package but are not one's full path ("ownership", "rollout/viewmodel").
	imports, abbreviated []string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// packageTable reads the table under "## Packages" of src (architecture.md). Names in the third column are
// kubedeploy packages when they are one's path (or full import path); names whose first element has a dot are
// other modules'; any other name with a slash, or equal to a package's last element, is abbreviated.
func packageTable(src string, pkgs map[string]goPackage) []packageRow {
	lastElems := map[string]bool{}
	for p := range pkgs {
		lastElems[path.Base(p)] = true
	}
	var rows []packageRow
	in := false
	for i, line := range strings.Split(src, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Packages"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			row := packageRow{line: i + 1}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
				row.packages = append(row.packages, strings.TrimPrefix(m[1], modulePath))
			}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[len(cells)-2], -1) {
				name := strings.TrimPrefix(m[1], modulePath)
				_, known := pkgs[name]
				first, _, _ := strings.Cut(name, "/")
				switch {
				case known:
					row.imports = append(row.imports, name)
				case !strings.Contains(first, ".") && (strings.Contains(name, "/") || lastElems[name]):
					row.abbreviated = append(row.abbreviated, name)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// TestArchitectureTableMatchesGoList: every package of the module has exactly one row in architecture.md's
// package table, each name of the first column is a package, and the kubedeploy packages the imports column
// names are exactly those the row's packages import (their union for a row of several): no edge missing, none
// invented. A package of tests only is held to its tests' imports.
func TestArchitectureTableMatchesGoList(t *testing.T) {
	pkgs := modulePackages(t)
	src, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := packageTable(string(src), pkgs)
	if len(rows) < 10 {
		t.Fatalf("found %d rows in architecture.md's package table: the parser no longer matches the page", len(rows))
	}
	rowOf := map[string]int{}
	for _, row := range rows {
		var want []string
		for _, p := range row.packages {
			pkg, ok := pkgs[p]
			if !ok {
				t.Errorf("architecture.md:%d: %q is not a package of the module", row.line, p)
				continue
			}
			if prev, dup := rowOf[p]; dup {
				t.Errorf("architecture.md:%d: %s has a row already (line %d)", row.line, p, prev)
			}
			rowOf[p] = row.line
			want = append(want, pkg.kubedeployImports()...)
		}
		checkRowImports(t, row, want)
	}
	for p := range pkgs {
		if _, ok := rowOf[p]; !ok {
			t.Errorf("architecture.md: no row for package %s (it imports %v)", p, pkgs[p].kubedeployImports())
		}
	}
}

// checkRowImports compares row's imports column with want, the kubedeploy packages its packages import.
func checkRowImports(t *testing.T, row packageRow, want []string) {
	t.Helper()
	slices.Sort(want)
	want = slices.Compact(want)
	for _, p := range row.packages {
		want = slices.DeleteFunc(want, func(w string) bool { return w == p })
	}
	var missing, invented []string
	for _, w := range want {
		if !slices.Contains(row.imports, w) {
			missing = append(missing, w)
		}
	}
	for _, d := range row.imports {
		if !slices.Contains(want, d) && !slices.Contains(row.packages, d) {
			invented = append(invented, d)
		}
	}
	if len(missing) > 0 || len(invented) > 0 || len(row.abbreviated) > 0 {
		t.Errorf("architecture.md:%d (%s): imports column misses %v, names %v that are not imported, abbreviates %v (name packages by their module path)",
			row.line, strings.Join(row.packages, ", "), missing, invented, row.abbreviated)
	}
}

// kubernetesModule is the upstream Kubernetes module's path, spelled in two parts so that a text search for its
// imports (the project's own checks) does not take this rule for an import.
const kubernetesModule = "k8s.io/" + "kubernetes"

// TestImportRules enforces architecture.md's import rules on every import, tests' included:
// internal/controller/... never imports internal/manager, internal/controlplane or internal/cli; the two
// controllers never import each other; nothing imports upstream's controller packages (kubernetesModule's
// pkg/controller/...); and nothing outside internal/controlplane imports kubernetesModule at all.
func TestImportRules(t *testing.T) {
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, pkg := range modulePackages(t) {
		for _, imp := range append(slices.Clone(pkg.imports), pkg.testImports...) {
			rel, ours := strings.CutPrefix(imp, modulePath)
			var broken string
			switch {
			case ours && under(pkg.path, "internal/controller") &&
				(under(rel, "internal/manager") || under(rel, "internal/controlplane") || under(rel, "internal/cli")):
				broken = "a controller package imports the manager, the control plane or the CLI"
			case ours && (pkg.path == "internal/controller/deployment" && under(rel, "internal/controller/replicaset") ||
				pkg.path == "internal/controller/replicaset" && under(rel, "internal/controller/deployment")):
				broken = "the two controllers import each other"
			case under(imp, kubernetesModule+"/pkg/controller"):
				broken = "upstream's controllers are imported"
			case under(imp, kubernetesModule) && !under(pkg.path, "internal/controlplane"):
				broken = kubernetesModule + " is imported outside internal/controlplane"
			}
			if broken != "" {
				t.Errorf("%s imports %s: %s", pkg.path, imp, broken)
			}
		}
	}
}
