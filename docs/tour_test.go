package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The README's tour (issue 33): TestReadmeTour runs the ```sh blocks of its
// "Set up" and "A three-minute tour" sections, verbatim, against a fresh
// `kubedeploy up --data-dir <temp> --api-port 0`, and compares what they print
// with the ```text block after each, following the convention at the top of
// docs/development.md.

// tourSections are the README headings whose ```sh blocks make up the tour.
var tourSections = []string{"Set up", "A three-minute tour"}

// setUpCommands is what the tour's set-up block runs. TestReadmeTour builds
// kubedeploy and starts `up` itself (into temporary directories, with a data
// dir other than ~/.kubedeploy), so it skips that block; it checks that the
// block holds exactly these commands, so that the README cannot say more there
// than the test did.
var setUpCommands = []string{"go install ./cmd/kubedeploy", "kubedeploy up"}

const (
	// tourTimeout bounds the whole test: the build (cached: about 40 s of
	// linking on 2 busy cores), up's start (seconds) and the tour's blocks
	// (about 25 s, 15 s of them the watch that times out).
	tourTimeout = 6 * time.Minute
	// blockTimeout bounds one ```sh block: a `rollout watch` of a rollout
	// that never completes would otherwise wait for the progress deadline.
	blockTimeout = 2 * time.Minute
	// upReadyLine starts the last line of up's ready message.
	upReadyLine = "Press Ctrl-C to stop"
)

var (
	exitsMarkerRE = regexp.MustCompile(`^<!-- exits (\d+) -->$`)
	setUpRE       = regexp.MustCompile(`(?m)^\s*(go install|kubedeploy up)\b`)
)

// tourStep is one ```sh block of the tour and the output the README shows for it.
type tourStep struct {
	sh     block
	exits  int    // the exit code <!-- exits N --> gives the block; 0 without it
	text   *block // the ```text block after it, nil when there is none
	timing bool   // text is marked <!-- timing -->
	setUp  bool   // the block installs kubedeploy and starts up
}

// TestReadmeTour runs the README's tour as its reader would, in a shell of
// its own beside a running `kubedeploy up` (issue 33): every ```sh block
// verbatim with `bash -e -c` from the repository's root, each exiting 0 or
// as <!-- exits N --> says, and printing what its ```text block shows.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("the tour builds kubedeploy and starts a cluster (not with -short)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the tour's commands are bash, and up is stopped with SIGINT")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("the tour's blocks run with bash, which is not on PATH")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("building kubedeploy needs the go command, which is not on PATH")
	}
	steps := tourSteps(t, parse(readmePath, readFile(t, readmePath)))

	ctx, cancel := context.WithTimeout(context.Background(), tourTimeout)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin, home, dataDir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "data")
	buildKubedeploy(ctx, t, goTool, root, bin)
	statSources(root)

	env := tourShellEnv(bin, home)
	began := time.Now()
	banner := startTourUp(ctx, t, filepath.Join(bin, "kubedeploy"), root, env, dataDir)
	t.Logf("up --data-dir %s ready in %.1fs", dataDir, time.Since(began).Seconds())
	env = append(env, applyHints(t, banner, dataDir)...)

	for _, s := range steps {
		if s.setUp {
			continue // the test built kubedeploy and started up above
		}
		runTourStep(ctx, t, bash, root, env, dataDir, s)
	}
}

// buildKubedeploy builds ./cmd/kubedeploy from root into bin/kubedeploy with
// goTool, failing the test when the build fails, and logs how long it took.
func buildKubedeploy(ctx context.Context, t *testing.T, goTool, root, bin string) {
	t.Helper()
	began := time.Now()
	build := exec.CommandContext(ctx, goTool, "build", "-o", filepath.Join(bin, "kubedeploy"), "./cmd/kubedeploy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubedeploy: %v\n%s", err, out)
	}
	t.Logf("built kubedeploy in %.1fs", time.Since(began).Seconds())
}

// tourShellEnv is the environment of the shell the user types the tour into:
// kubedeploy (in bin) first on PATH, a HOME of its own (kubectl's cache, and
// no ~/.kubedeploy to fall back on: the commands find the cluster only
// through what up's hint exports), and none of the caller's KUBECONFIG or
// KUBEDEPLOY_ settings.
func tourShellEnv(bin, home string) []string {
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PATH" && name != "HOME" && name != "KUBECONFIG" && !strings.HasPrefix(name, "KUBEDEPLOY_") {
			env = append(env, kv)
		}
	}
	return env
}

// runTourStep runs one ```sh block of the tour in root with env and fails the
// test when it cannot run or exits other than as the README says, and
// reports an error when its output differs from its ```text block.
func runTourStep(ctx context.Context, t *testing.T, bash, root string, env []string, dataDir string, s tourStep) {
	t.Helper()
	began := time.Now()
	out, code, err := runTourBlock(ctx, bash, root, env, s.sh.body)
	t.Logf("README.md:%d: exit %d after %.1fs", s.sh.line, code, time.Since(began).Seconds())
	where := fmt.Sprintf("README.md:%d", s.sh.line)
	switch {
	case err != nil:
		t.Fatalf("%s: ```sh block:\n%s\n%v; output:\n%s", where, s.sh.body, err, out)
	case code != s.exits:
		t.Fatalf("%s: ```sh block exited %d, the README says %d (<!-- exits N --> before the fence gives a non-zero one):\n%s\noutput:\n%s", where, code, s.exits, s.sh.body, out)
	}
	if s.text != nil {
		if msg := compareOutput(*s.text, s.timing, out, dataDir); msg != "" {
			t.Errorf("%s: this ```sh block's output differs from the README's:\n%s", where, msg)
		}
	}
}

// statSources stats every file under root but tests and .git: go test
// reuses a passing result while the files and variables the test itself read
// are unchanged, and go build read the binary's sources, not the test; so a
// change to the code behind the tour's output reruns the tour. A file gone
// meanwhile (others edit the tree) is no error: the walk only informs the cache.
func statSources(root string) {
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case !d.IsDir() && !strings.HasSuffix(path, "_test.go"):
			_, _ = os.Stat(path)
		}
		return nil
	})
}

// tourSteps returns the ```sh blocks of the tour's sections, in order, each
// with its exit code and its ```text block, and checks the set-up blocks.
func tourSteps(t *testing.T, doc *document) []tourStep {
	t.Helper()
	var steps []tourStep
	setUps := 0
	for _, title := range tourSections {
		start, end := sectionLines(doc, title)
		if start == 0 {
			t.Fatalf("README.md has no \"## %s\" section: the tour test runs its ```sh blocks (tourSections)", title)
		}
		for i, b := range doc.blocks {
			if b.lang != "sh" || b.line < start || b.line >= end {
				continue
			}
			s := tourStep{sh: b}
			if b.line >= 2 {
				if m := exitsMarkerRE.FindStringSubmatch(strings.TrimSpace(doc.lines[b.line-2])); m != nil {
					s.exits, _ = strconv.Atoi(m[1])
				}
			}
			if i+1 < len(doc.blocks) {
				next := doc.blocks[i+1]
				if next.lang == "text" && onlyBlankOrMarker(doc.lines[b.end:next.line-1]) {
					s.text = &next
					s.timing = strings.TrimSpace(doc.lines[next.line-2]) == "<!-- timing -->"
				}
			}
			if setUpRE.MatchString(b.body) {
				s.setUp = true
				setUps++
				if got := commands(b.body); strings.Join(got, "\n") != strings.Join(setUpCommands, "\n") {
					t.Errorf("README.md:%d: the set-up block runs %q; the tour test runs only %q itself (go build, then up --data-dir): change the test with the block", b.line, got, setUpCommands)
				}
			}
			steps = append(steps, s)
		}
	}
	if setUps == 0 || len(steps) == setUps {
		t.Fatalf("README.md's tour has %d set-up blocks and %d others; want the set-up block and the tour's commands", setUps, len(steps)-setUps)
	}
	return steps
}

// sectionLines returns the 1-based line of the heading titled title and the
// line of the next heading of its level or higher (one past the end), or 0, 0.
func sectionLines(doc *document, title string) (start, end int) {
	inBlock := func(line int) bool {
		for _, b := range doc.blocks {
			if line >= b.line && line <= b.end {
				return true
			}
		}
		return false
	}
	level := 0
	for i, l := range doc.lines {
		m := headingRE.FindStringSubmatch(l)
		if m == nil || inBlock(i+1) {
			continue
		}
		switch {
		case level == 0 && m[2] == title:
			start, level = i+1, len(m[1])
		case level > 0 && len(m[1]) <= level:
			return start, i + 1
		}
	}
	return start, len(doc.lines) + 1
}

// commands returns a ```sh block's commands: its lines without comments and blanks.
func commands(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// startTourUp starts `kubedeploy up --data-dir dataDir --api-port 0` (the
// kubedeploy binary) from root with env, waits for its ready message and
// returns up's output so far; a cleanup stops it with SIGINT (Ctrl-C) and
// checks that it exits 0.
func startTourUp(ctx context.Context, t *testing.T, kubedeploy, root string, env []string, dataDir string) string {
	t.Helper()
	cmd := exec.Command(kubedeploy, "up", "--data-dir", dataDir, "--api-port", "0")
	cmd.Dir, cmd.Env = root, env
	out := &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed when up has exited, with waitErr set.
	done, ready := make(chan struct{}), make(chan struct{})
	var waitErr error
	go func() {
		copyUpOutput(stdout, out, ready)
		waitErr = cmd.Wait()
		close(done)
	}()
	var upExited bool // before it was ready, and reported
	t.Cleanup(func() {
		select {
		case <-done:
			if !upExited {
				t.Errorf("kubedeploy up exited before the end of the tour: %v; its output:\n%s", waitErr, out)
			}
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
			if waitErr != nil {
				t.Errorf("kubedeploy up exited with %v after SIGINT; its output:\n%s", waitErr, out)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("kubedeploy up did not stop within a minute of SIGINT; its output:\n%s", out)
		}
	})
	select {
	case <-ready:
		return out.String()
	case <-done:
		upExited = true
		t.Fatalf("kubedeploy up exited before it was ready: %v; its output:\n%s", waitErr, out)
	case <-ctx.Done():
		t.Fatalf("kubedeploy up not ready within the test's %v; its output:\n%s", tourTimeout, out)
	}
	return ""
}

// copyUpOutput copies up's stdout to out line by line until it ends, closing
// ready at the first line that starts with upReadyLine.
func copyUpOutput(stdout io.Reader, out io.Writer, ready chan struct{}) {
	sc := bufio.NewScanner(stdout)
	readyClosed := false
	for sc.Scan() {
		_, _ = out.Write([]byte(sc.Text() + "\n"))
		if !readyClosed && strings.HasPrefix(sc.Text(), upReadyLine) {
			close(ready)
			readyClosed = true
		}
	}
}

// applyHints reads the "try:" lines of up's ready message as the user the
// tour addresses would: it returns the variables the `export` lines set, and
// checks that the commands up suggests run `kubedeploy` (the tour's prefix,
// right since the test put kubedeploy first on PATH). It does not run them:
// the tour's first block applies the same manifest and says it is created.
// The README tells whoever started up with --data-dir to run the
// `export KUBECONFIG=DIR/kubeconfig` line up prints; the test checks it does.
func applyHints(t *testing.T, banner, dataDir string) []string {
	t.Helper()
	hints := tryLines(banner)
	if len(hints) == 0 {
		t.Fatalf("kubedeploy up printed no \"try:\" lines; its output:\n%s", banner)
	}
	var env []string
	wantExport := "KUBECONFIG=" + filepath.Join(dataDir, "kubeconfig")
	exported := false
	for _, h := range hints {
		switch {
		case strings.HasPrefix(h, "export "):
			name, value, ok := strings.Cut(strings.TrimPrefix(h, "export "), "=")
			if !ok {
				t.Fatalf("up's hint %q: want export NAME=VALUE", h)
			}
			kv := name + "=" + shellUnquote(value)
			exported = exported || kv == wantExport
			env = append(env, kv)
		case strings.HasPrefix(h, "("): // a remark
		case !strings.HasPrefix(h, "kubedeploy "):
			t.Errorf("up's hint %q does not start with `kubedeploy`, though the kubedeploy first on PATH is the one running; the tour's commands would not be the ones up suggests", h)
		}
	}
	if !exported {
		t.Fatalf("up --data-dir %s printed no `export %s` line, which the README's tour tells the reader to run; its hints:\n%s", dataDir, wantExport, strings.Join(hints, "\n"))
	}
	return env
}

// tryLines returns the "try:" field of up's ready message, one hint a line:
// the text after the label and the lines indented to the same column.
func tryLines(banner string) []string {
	var out []string
	col := -1
	for _, l := range strings.Split(banner, "\n") {
		if col < 0 {
			if i := strings.Index(l, "try:"); i >= 0 && strings.TrimSpace(l[:i]) == "" {
				rest := l[i+len("try:"):]
				col = len(l) - len(strings.TrimLeft(rest, " "))
				out = append(out, strings.TrimSpace(rest))
			}
			continue
		}
		if len(l) <= col || strings.TrimSpace(l[:col]) != "" || l[col] == ' ' {
			break
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// shellUnquote undoes the quoting up gives a path that needs it: the path
// between single quotes, each quote inside it closed, escaped and reopened.
func shellUnquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'\''`, "'")
	}
	return s
}

// runTourBlock runs a ```sh block's body with `bash -e -c` in dir with env
// and returns its stdout and stderr together, in the order a terminal shows
// them, and its exit code; err is set when it could not run or timed out.
func runTourBlock(ctx context.Context, bash, dir string, env []string, body string) (out string, code int, err error) {
	ctx, cancel := context.WithTimeout(ctx, blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-e", "-c", body)
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf // one pipe for both: their order is kept
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return buf.String(), -1, fmt.Errorf("not done after %v", blockTimeout)
	case errors.As(err, &exitErr):
		return buf.String(), exitErr.ExitCode(), nil
	case err != nil:
		return buf.String(), -1, err
	}
	return buf.String(), 0, nil
}

// compareOutput compares a command's output with the README's ```text block
// for it, following docs/development.md: every line of the block in order,
// consecutive unless a line holding only … stands for lines left out (none or
// more, here), a … inside a line for part of it; the block's first and last
// lines are the output's unless … stands there. Trailing spaces do not count.
// A timing block is compared after maskTiming on both sides. It returns "" or
// what differs, naming the README's line.
func compareOutput(text block, timing bool, output, dataDir string) string {
	want, got := lines(text.body), lines(strings.TrimRight(output, "\n"))
	for i := range want {
		want[i] = strings.TrimRight(want[i], " \t")
	}
	for i := range got {
		got[i] = strings.TrimRight(got[i], " \t\r")
	}
	note, masked := "", ""
	if timing {
		masked = ", masked"
		note = " (timing block: clock times, durations, ports, the data dir and pod-name suffixes masked)"
		for i := range want {
			want[i] = maskTiming(want[i], dataDir)
		}
		for i := range got {
			got[i] = maskTiming(got[i], dataDir)
		}
	}
	reached, ok := matchLines(want, got)
	if ok {
		return ""
	}
	var b strings.Builder
	if reached < len(want) {
		fmt.Fprintf(&b, "README.md:%d: this line of the ```text block at line %d is not in the output where the lines above it put it%s:\n    %s\n",
			text.line+1+reached, text.line, note, want[reached])
	} else {
		fmt.Fprintf(&b, "README.md:%d: the output goes on after the last line of the ```text block at line %d (end the block with a line holding only … to leave the rest out)%s\n",
			text.end, text.line, note)
	}
	fmt.Fprintf(&b, "--- README.md:%d-%d, the ```text block%s\n", text.line+1, text.end-1, masked)
	for i, l := range want {
		fmt.Fprintf(&b, "%4d | %s\n", text.line+1+i, l)
	}
	fmt.Fprintf(&b, "+++ the output%s\n", masked)
	for i, l := range got {
		fmt.Fprintf(&b, "%4d | %s\n", i+1, l)
	}
	return b.String()
}

// matchLines reports whether the patterns want match the lines got, and how
// many of want's lines matched in order before the first that did not.
func matchLines(want, got []string) (reached int, ok bool) {
	type state struct{ i, j int }
	memo := map[state]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i > reached {
			reached = i
		}
		if r, seen := memo[state{i, j}]; seen {
			return r
		}
		var r bool
		switch {
		case i == len(want):
			r = j == len(got)
		case strings.TrimSpace(want[i]) == "…":
			r = match(i+1, j) || (j < len(got) && match(i, j+1))
		default:
			r = j < len(got) && lineMatches(want[i], got[j]) && match(i+1, j+1)
		}
		memo[state{i, j}] = r
		return r
	}
	ok = match(0, 0)
	return reached, ok
}

// lineMatches reports whether line is pattern, where a … in pattern stands
// for any text.
func lineMatches(pattern, line string) bool {
	parts := strings.Split(pattern, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(line)
}

var (
	// podSuffixRE: the five characters (from the alphabet of rand.String)
	// that follow a ReplicaSet's name in its pods' names.
	podSuffixRE = regexp.MustCompile(`([a-z0-9])-[bcdfghjklmnpqrstvwxz2456789]{5}\b`)
	portRE      = regexp.MustCompile(`\b(127\.0\.0\.1|localhost|\[::1\]):\d+\b`)
	clockRE     = regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}\b`)
	durationRE  = regexp.MustCompile(`\b(\d+(\.\d+)?(ns|us|µs|ms|h|m|s))+\b`)
	dataDirRE   = regexp.MustCompile(`(~|(/[\w.-]+)+)/\.kubedeploy\b`)
)

// maskTiming replaces in line the values docs/development.md lists as
// varying from run to run: the data dir's path (dataDir, or ~/.kubedeploy),
// pod-name suffixes, the API server's port, clock times, durations and ages.
func maskTiming(line, dataDir string) string {
	if dataDir != "" {
		line = strings.ReplaceAll(line, dataDir, "DATA-DIR")
	}
	line = dataDirRE.ReplaceAllString(line, "DATA-DIR")
	line = podSuffixRE.ReplaceAllString(line, "$1-xxxxx")
	line = portRE.ReplaceAllString(line, "$1:PORT")
	line = clockRE.ReplaceAllString(line, "hh:mm:ss")
	return durationRE.ReplaceAllString(line, "DURATION")
}

// TestTourOutputMatch: compareOutput's rules on small cases, so that the
// tour's comparison is known to be neither looser nor stricter than the
// convention (runs with -short).
func TestTourOutputMatch(t *testing.T) {
	for _, c := range []struct {
		name, want, got string
		timing, ok      bool
	}{
		{"exact", "a\nb", "a\nb\n", false, true},
		{"line left out", "a\nb", "a\nx\nb", false, false},
		{"gap", "a\n…\nb", "a\nx\ny\nb", false, true},
		{"empty gap", "a\n…\nb", "a\nb", false, true},
		{"leading gap", "…\nb", "x\nb", false, true},
		{"extra at the end", "a", "a\nb", false, false},
		{"trailing gap", "a\n…", "a\nb", false, true},
		{"part of a line", "why: 2 pods: a, … (x)", "why: 2 pods: a, b (x)", false, true},
		{"part of a line, wrong end", "why: … (x)", "why: a (y)", false, false},
		{"timing unmasked", "17:43:00 up (3.8s)", "09:01:02 up (4.1s)", false, false},
		{"timing masked", "17:43:00 up (3.8s) on 127.0.0.1:40123", "09:01:02 up (4.1s) on 127.0.0.1:39999", true, true},
		{"pod suffix", "nginx-deployment-75bd87b6fd-2hv9v, … (c)", "nginx-deployment-75bd87b6fd-x7k2p, nginx-deployment-75bd87b6fd-q2t74 (c)", true, true},
		{"replica counts stay", "10/20 updated, 15 available", "20/20 updated, 15 available", true, false},
		{"replica set names stay", "new nginx-deployment-67ddcc54c8: 20 desired", "new nginx-deployment-75bd87b6fd: 20 desired", true, false},
		{"data dir", "state is kept in ~/.kubedeploy", "state is kept in /tmp/d", true, true},
	} {
		msg := compareOutput(block{lang: "text", line: 10, end: 12, body: c.want}, c.timing, c.got, "/tmp/d")
		if (msg == "") != c.ok {
			t.Errorf("%s: want %q, got %q: matched %v, want %v\n%s", c.name, c.want, c.got, msg == "", c.ok, msg)
		}
	}
}

// TestExitsMarkers: <!-- exits N --> is only ever on the line directly before
// a ```sh fence, where the tour test reads it (docs/development.md).
func TestExitsMarkers(t *testing.T) {
	for _, f := range documents(t) {
		d := parse(f, readFile(t, f))
		for i, l := range d.lines {
			if !strings.HasPrefix(strings.TrimSpace(l), "<!-- exits") {
				continue // prose that names the marker, in a code span
			}
			ok := exitsMarkerRE.MatchString(strings.TrimSpace(l))
			if ok {
				ok = false
				for _, b := range d.blocks {
					ok = ok || (b.line == i+2 && b.lang == "sh")
				}
			}
			if !ok {
				t.Errorf("%s:%d: %q: <!-- exits N --> goes alone on the line directly before a ```sh fence", f, i+1, l)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
