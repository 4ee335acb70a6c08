// Package docs holds the user documentation; its test keeps the documents
// honest about the code.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
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

// The README is the front page (issue 33): short, set-up first, and the way
// into every page under docs/. These tests keep it so, and keep every
// relative link of the documents pointing at something that exists.

const readmePath = "../README.md"

// maxReadmeLines bounds the README: what a newcomer does not need on the
// first page belongs on a page under docs/.
const maxReadmeLines = 250

// setUpBefore is the line the README's first ```sh block must open before:
// the set-up commands come first, ahead of any reference material.
const setUpBefore = 40

func TestReadmeIsShort(t *testing.T) {
	src := readFile(t, readmePath)
	if n := len(lines(src)); n > maxReadmeLines {
		t.Errorf("README.md has %d lines; keep it at most %d and move reference material to a page under docs/", n, maxReadmeLines)
	}
}

func TestReadmeSetUpFirst(t *testing.T) {
	doc := parse(readmePath, readFile(t, readmePath))
	var first *block
	for i := range doc.blocks {
		if doc.blocks[i].lang == "sh" {
			first = &doc.blocks[i]
			break
		}
	}
	if first == nil {
		t.Fatal("README.md has no ```sh block")
	}
	if first.line >= setUpBefore {
		t.Errorf("README.md's first ```sh block opens at line %d; it must open before line %d", first.line, setUpBefore)
	}
	install := strings.Index(first.body, "go install ./cmd/kubedeploy")
	up := regexp.MustCompile(`(?m)^\s*kubedeploy up\b`).FindStringIndex(first.body)
	switch {
	case install < 0:
		t.Errorf("README.md's first ```sh block (line %d) does not contain `go install ./cmd/kubedeploy`:\n%s", first.line, first.body)
	case up == nil:
		t.Errorf("README.md's first ```sh block (line %d) does not run `kubedeploy up`:\n%s", first.line, first.body)
	case up[0] < install:
		t.Errorf("README.md's first ```sh block (line %d) runs `kubedeploy up` before `go install ./cmd/kubedeploy`", first.line)
	}
}

func TestReadmeShowsTestCommand(t *testing.T) {
	doc := parse(readmePath, readFile(t, readmePath))
	for _, b := range doc.blocks {
		if b.lang == "sh" && regexp.MustCompile(`(?m)^go test \./\.\.\.(\s|$)`).MatchString(b.body) {
			return
		}
	}
	t.Error("README.md shows no ```sh block with `go test ./...` (CI runs the README's test command)")
}

func TestEveryPageLinkedFromReadme(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages found: %v", err)
	}
	doc := parse(readmePath, readFile(t, readmePath))
	linked := map[string]bool{}
	for _, l := range doc.links {
		if path, _, local := splitTarget(l.target); local && path != "" {
			linked[filepath.Clean(filepath.Join("..", path))] = true
		}
	}
	for _, p := range pages {
		if !linked[filepath.Join("..", "docs", p)] {
			t.Errorf("docs/%s is not linked from README.md: add it to \"Where to go next\"", p)
		}
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	files := documents(t)
	docs := map[string]*document{}
	for _, f := range files {
		docs[filepath.Clean(f)] = parse(f, readFile(t, f))
	}
	checked := 0
	for _, f := range files {
		d := docs[filepath.Clean(f)]
		for _, l := range d.links {
			path, anchor, local := splitTarget(l.target)
			if !local {
				continue
			}
			checked++
			target := filepath.Clean(f)
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", f, l.line, l.target, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			td := docs[target]
			if td == nil {
				td = parse(target, readFile(t, target))
				docs[target] = td
			}
			if !td.anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s (has %s)", f, l.line, l.target, target, anchor, strings.Join(sortedKeys(td.anchors), ", "))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern no longer matches the documents")
	}
}

// TestOutputBlockConvention keeps the convention that docs/development.md
// describes for a later test that runs the documents' commands: a ```text
// block follows a ```sh block directly, and <!-- timing --> marks only such
// a block.
func TestOutputBlockConvention(t *testing.T) {
	for _, f := range documents(t) {
		d := parse(f, readFile(t, f))
		for i, b := range d.blocks {
			if b.lang != "text" {
				continue
			}
			if i == 0 || d.blocks[i-1].lang != "sh" || !onlyBlankOrMarker(d.lines[d.blocks[i-1].end:b.line-1]) {
				t.Errorf("%s:%d: a ```text block holds the output of the ```sh block directly above it; use a plain ``` block for other sample output", f, b.line)
			}
		}
		for _, m := range d.timingMarkers {
			if !d.textBlockAt(m + 1) {
				t.Errorf("%s:%d: <!-- timing --> must be on the line directly before a ```text fence", f, m)
			}
		}
	}
}

// documents returns the README and every page under docs/, as paths relative
// to this package's directory.
func documents(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages found: %v", err)
	}
	return append([]string{readmePath}, pages...)
}

type block struct {
	lang string // the fence's info string's first word: "sh", "text", "" for a plain fence
	line int    // the opening fence's line, 1-based
	end  int    // the closing fence's line, 1-based
	body string
}

type link struct {
	target string
	line   int
}

type document struct {
	lines         []string
	blocks        []block
	links         []link
	anchors       map[string]bool
	timingMarkers []int // 1-based lines holding only <!-- timing -->
}

func (d *document) textBlockAt(line int) bool {
	for _, b := range d.blocks {
		if b.line == line && b.lang == "text" {
			return true
		}
	}
	return false
}

var (
	fenceRE      = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")
	headingRE    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLinkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	schemeRE     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// parse reads a Markdown document as far as these tests need: fenced blocks,
// headings (with GitHub's anchors), and link targets outside code.
func parse(name, src string) *document {
	d := &document{lines: lines(src), anchors: map[string]bool{}}
	seen := map[string]int{}
	var para []string // the current paragraph's lines, for code spans that cross lines
	var paraStart int
	flush := func() {
		if len(para) == 0 {
			return
		}
		text := stripCodeSpans(strings.Join(para, "\n"))
		for i, l := range strings.Split(text, "\n") {
			for _, m := range inlineLinkRE.FindAllStringSubmatch(l, -1) {
				d.links = append(d.links, link{target: m[1], line: paraStart + i})
			}
			if m := refDefRE.FindStringSubmatch(l); m != nil {
				d.links = append(d.links, link{target: m[1], line: paraStart + i})
			}
		}
		para = nil
	}
	for i := 0; i < len(d.lines); i++ {
		l := d.lines[i]
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			flush()
			b := fencedBlock(d.lines, i, m[1], m[2])
			d.blocks = append(d.blocks, b)
			i = b.end - 1
			continue
		}
		if strings.TrimSpace(l) == "<!-- timing -->" {
			d.timingMarkers = append(d.timingMarkers, i+1)
		}
		if m := headingRE.FindStringSubmatch(l); m != nil {
			flush()
			a := anchor(m[2])
			if n := seen[a]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, n)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
			d.links = append(d.links, linksIn(m[2], i+1)...)
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraStart = i + 1
		}
		para = append(para, l)
	}
	flush()
	return d
}

// fencedBlock reads the fenced block whose opening fence (fence, with info
// string lang) is ls[i], up to its closing fence or the end of the document.
func fencedBlock(ls []string, i int, fence, lang string) block {
	b := block{lang: lang, line: i + 1}
	var body []string
	j := i + 1
	for ; j < len(ls); j++ {
		c := strings.TrimSpace(ls[j])
		if strings.HasPrefix(c, fence[:1]) && strings.Trim(c, fence[:1]) == "" && len(c) >= len(fence) {
			break
		}
		body = append(body, ls[j])
	}
	b.end = j + 1
	b.body = strings.Join(body, "\n")
	return b
}

func linksIn(text string, line int) []link {
	var out []link
	for _, m := range inlineLinkRE.FindAllStringSubmatch(stripCodeSpans(text), -1) {
		out = append(out, link{target: m[1], line: line})
	}
	return out
}

// stripCodeSpans replaces each code span (a run of N backticks up to the
// next run of exactly N) by spaces, keeping the text's lines, so that nothing
// inside code counts as a link.
func stripCodeSpans(s string) string {
	out := []byte(s)
	run := func(i int) int { // length of the backtick run at i
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		return n
	}
	for i := 0; i < len(s); {
		n := run(i)
		if n == 0 {
			i++
			continue
		}
		end := -1
		for j := i + n; j < len(s); {
			if m := run(j); m > 0 {
				if m == n {
					end = j + m
					break
				}
				j += m
				continue
			}
			j++
		}
		if end < 0 { // no closing run: literal backticks
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if out[k] != '\n' {
				out[k] = ' '
			}
		}
		i = end
	}
	return string(out)
}

// anchor is GitHub's anchor for a heading: the rendered text (links by their
// text, code without backticks) lowercased, every character that is not a
// letter, a digit, a space, '-' or '_' dropped, and spaces turned into '-'.
func anchor(heading string) string {
	heading = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// splitTarget splits a link target into its path and anchor; local is false
// for a URL with a scheme (https:, mailto:), which these tests do not fetch.
func splitTarget(target string) (path, anchor string, local bool) {
	if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", "", false
	}
	path, anchor, _ = strings.Cut(target, "#")
	return path, anchor, true
}

func onlyBlankOrMarker(ls []string) bool {
	for _, l := range ls {
		if s := strings.TrimSpace(l); s != "" && s != "<!-- timing -->" {
			return false
		}
	}
	return true
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

func lines(src string) []string {
	return strings.Split(strings.TrimSuffix(src, "\n"), "\n")
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAnchorAndCodeSpans(t *testing.T) {
	for heading, want := range map[string]string{
		"`kubedeploy up` flags":                  "kubedeploy-up-flags",
		"Observe mode's cost":                    "observe-modes-cost",
		"EX-1: hold a rollout at a partition":    "ex-1-hold-a-rollout-at-a-partition",
		"A picture of the rollout: `--timeline`": "a-picture-of-the-rollout---timeline",
		"Extensions (opt-in, off by default)":    "extensions-opt-in-off-by-default",
		"See [the spec](spec.md) for_each item":  "see-the-spec-for_each-item",
		"1.3 Hash algorithm (`controller.Hash`)": "13-hash-algorithm-controllerhash",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	d := parse("x.md", "a [l](a.md) `[c](b.md)` ```` ``x [d](c.md) ```` [e](d.md#h)\n")
	var got []string
	for _, l := range d.links {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "a.md d.md#h" {
		t.Errorf("links outside code = %q, want [a.md d.md#h]", got)
	}
}
