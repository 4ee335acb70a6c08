// Package hygiene checks rules that hold for the whole module's source rather than for one package.
package hygiene

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFunctionLines is the longest a function may be, counted from its func line to its closing brace
// inclusive (issue 34: "no function over 60 lines anywhere in the module").
const maxFunctionLines = 60

// TestNoFunctionOverSixtyLines parses every .go file of the module (tests included; testdata and hidden
// directories left out) and fails naming each function or method longer than maxFunctionLines.
func TestNoFunctionOverSixtyLines(t *testing.T) {
	long, err := longFunctions("../..", maxFunctionLines)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > 0 {
		t.Errorf("functions over %d lines:\n%s", maxFunctionLines, strings.Join(long, "\n"))
	}
}

// The check finds a long function: a file with one 61-line function and one of 60 gives exactly the first.
func TestLongFunctionsFindsOne(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 1\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("tooLong", 61) + "\n" + body("justRight", 60)
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	long, err := longFunctions(dir, 60)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) != 1 || !strings.Contains(long[0], "tooLong") || !strings.Contains(long[0], "61 lines") {
		t.Errorf("longFunctions = %q, want only tooLong at 61 lines", long)
	}
}

// longFunctions returns "path:line name: N lines" for each function or method declaration in the .go files under
// root longer than max lines, sorted; a function literal counts toward the declaration it is written in.
func longFunctions(root string, max int) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > max {
				out = append(out, fmt.Sprintf("%s:%d %s: %d lines", path, start.Line, fn.Name.Name, n))
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
