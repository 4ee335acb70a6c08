// Package docs holds the user documentation; its test keeps the documents
// honest about the code.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCitedTestsExist: every Go test a document names as proof (docs/safety.md
// cites one per IM row of the spec) is defined somewhere in the repository, so
// renaming or deleting a test cannot leave a claim without its proof.
func TestCitedTestsExist(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no documents found: %v", err)
	}
	defined := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range funcRE.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	citeRE := regexp.MustCompile("`(Test\\w+)\\*?`")
	cited := 0
	for _, doc := range docs {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range citeRE.FindAllStringSubmatch(string(src), -1) {
			cited++
			name := m[1]
			if strings.HasSuffix(m[0], "*`") {
				found := false
				for d := range defined {
					found = found || strings.HasPrefix(d, name)
				}
				if !found {
					t.Errorf("%s cites %s*, but no test starts with %s", doc, name, name)
				}
				continue
			}
			if !defined[name] {
				t.Errorf("%s cites %s, which no _test.go file defines", doc, name)
			}
		}
	}
	if cited == 0 {
		t.Fatal("no cited tests found: the pattern no longer matches the documents")
	}
}
