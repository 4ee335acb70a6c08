package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// focus selects, by full text, the specs of what kubedeploy implements: upstream's "[sig-apps] Deployment" and
// "[sig-apps] ReplicaSet" containers (not ReplicationController, DaemonSet, ...).
const focus = `^\[sig-apps\] (Deployment|ReplicaSet) `

// suiteDescription is the description upstream's e2e binary gives its ginkgo suite. Ginkgo matches --ginkgo.focus
// and --ginkgo.skip against it, a space and a spec's full text, so anchored expressions start with it.
const suiteDescription = "Kubernetes e2e suite"

// ginkgoFocus returns the --ginkgo.focus expression that selects exactly the specs focus does.
func ginkgoFocus() string {
	return "^" + regexp.QuoteMeta(suiteDescription+" ") + strings.TrimPrefix(focus, "^")
}

// skipTags are the spec tags skipped as a class: specs that must run alone, break the cluster on purpose, or are
// known to be unreliable upstream. Provider-specific specs skip themselves under --provider=skeleton.
var skipTags = []string{"[Serial]", "[Disruptive]", "[Flaky]"}

// simulatedPodSkips are the only specs skipped by name, each with the reason it cannot pass on KWOK's simulated
// pods, whichever controllers run. The full spec text is ginkgo's: containers, then the spec, then its tags.
var simulatedPodSkips = []struct{ spec, reason string }{
	{
		spec:   "[sig-apps] ReplicaSet should serve a basic image on each replica with a public image [Conformance]",
		reason: "it fetches HTTP from each pod through the API server's pod proxy; KWOK's simulated pods run no process and serve nothing",
	},
}

// skipRegexp returns ginkgo's --ginkgo.skip expression: skipTags anywhere and the exact full texts of
// simulatedPodSkips.
func skipRegexp() string {
	var alts []string
	for _, tag := range skipTags {
		alts = append(alts, regexp.QuoteMeta(tag))
	}
	for _, s := range simulatedPodSkips {
		alts = append(alts, "^"+regexp.QuoteMeta(suiteDescription+" "+s.spec)+"$")
	}
	return strings.Join(alts, "|")
}

// Outcome is what one spec did on one side.
type Outcome string

// The outcomes of a spec.
const (
	Passed  Outcome = "PASS"
	Failed  Outcome = "FAIL"
	Skipped Outcome = "SKIP"
)

// Result is one spec of the focus as a run reported it.
type Result struct {
	// Spec is the spec's full text.
	Spec    string
	Outcome Outcome
	// Took is the spec's run time; zero for a skipped spec.
	Took time.Duration
	// Why is, for a failed spec, the first line of its failure; for a skipped one, the reason: ours (named or by
	// tag) or the spec's own skip message.
	Why string
}

// readReport decodes ginkgo's JSON report (--ginkgo.json-report) and returns the "It" specs matching focus,
// sorted by spec text. A spec filtered out by skipRegexp is Skipped with our reason. It returns a decoding error,
// or an error for a suite not described as suiteDescription (ginkgoFocus and skipRegexp would match nothing).
func readReport(r io.Reader) ([]Result, error) {
	var reports []types.Report
	if err := json.NewDecoder(r).Decode(&reports); err != nil {
		return nil, fmt.Errorf("ginkgo JSON report: %w", err)
	}
	inFocus := regexp.MustCompile(focus)
	var out []Result
	for _, report := range reports {
		if report.SuiteDescription != suiteDescription {
			return nil, fmt.Errorf("ginkgo JSON report: suite %q, want %q", report.SuiteDescription, suiteDescription)
		}
		for _, spec := range report.SpecReports {
			if spec.LeafNodeType != types.NodeTypeIt || !inFocus.MatchString(spec.FullText()) {
				continue
			}
			out = append(out, result(spec))
		}
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Spec, b.Spec) })
	return out, nil
}

// result turns one spec report into a Result.
func result(spec types.SpecReport) Result {
	text := spec.FullText()
	res := Result{Spec: text, Took: spec.RunTime}
	switch {
	case spec.State == types.SpecStatePassed:
		res.Outcome = Passed
	case spec.State.Is(types.SpecStateFailureStates):
		res.Outcome, res.Why = Failed, firstLine(spec.Failure.Message)
	default:
		res.Outcome, res.Took, res.Why = Skipped, 0, skipReason(text, spec.Failure.Message)
	}
	return res
}

// skipReason says why the spec with full text text was skipped: a simulatedPodSkips reason, a skipTags tag, or the
// spec's own skip message.
func skipReason(text, message string) string {
	for _, s := range simulatedPodSkips {
		if s.spec == text {
			return "skipped by name: " + s.reason
		}
	}
	for _, tag := range skipTags {
		if strings.Contains(text, tag) {
			return "skipped: " + tag
		}
	}
	if message != "" {
		return "skipped by the spec: " + firstLine(message)
	}
	return "skipped"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Totals counts the Results of one run.
type Totals struct{ Passed, Failed, Skipped int }

// count returns the totals of results.
func count(results []Result) Totals {
	var t Totals
	for _, r := range results {
		switch r.Outcome {
		case Passed:
			t.Passed++
		case Failed:
			t.Failed++
		default:
			t.Skipped++
		}
	}
	return t
}

// check returns an error when a run cannot be called a pass: a spec failed, none passed (a run that matched
// nothing proves nothing), or a spec of simulatedPodSkips is not among results (the list would skip a spec the
// suite no longer has, or one renamed, and should follow it).
func check(results []Result) error {
	t := count(results)
	if t.Failed > 0 {
		return fmt.Errorf("%d of %d specs failed", t.Failed, len(results))
	}
	if t.Passed == 0 {
		return fmt.Errorf("no spec passed (%d matched %s)", len(results), focus)
	}
	for _, s := range simulatedPodSkips {
		if !slices.ContainsFunc(results, func(r Result) bool { return r.Spec == s.spec }) {
			return fmt.Errorf("the suite has no spec %q, which simulatedPodSkips skips by name", s.spec)
		}
	}
	return nil
}

// printResults writes one line per spec (outcome, run time, spec, and why for a failure or skip) and a closing line
// "conformance (side): N passed, N failed, N skipped".
func printResults(w io.Writer, side string, results []Result) {
	for _, r := range results {
		took := ""
		if r.Took > 0 {
			took = fmt.Sprintf("%.1fs", r.Took.Seconds())
		}
		line := fmt.Sprintf("%s  %6s  %s", r.Outcome, took, r.Spec)
		if r.Why != "" {
			line += "\n              " + r.Why
		}
		fmt.Fprintln(w, line)
	}
	t := count(results)
	fmt.Fprintf(w, "conformance (%s): %d passed, %d failed, %d skipped\n", side, t.Passed, t.Failed, t.Skipped)
}

// compare writes, for two sides' results, every spec whose outcome differs and returns how many do.
func compare(w io.Writer, a, b string, ra, rb []Result) int {
	outcome := func(rs []Result, spec string) Outcome {
		for _, r := range rs {
			if r.Spec == spec {
				return r.Outcome
			}
		}
		return "absent"
	}
	specs := map[string]bool{}
	for _, r := range append(slices.Clone(ra), rb...) {
		specs[r.Spec] = true
	}
	var diffs int
	for _, spec := range slices.Sorted(maps.Keys(specs)) {
		if oa, ob := outcome(ra, spec), outcome(rb, spec); oa != ob {
			diffs++
			fmt.Fprintf(w, "differs: %s: %s %s, %s %s\n", spec, a, oa, b, ob)
		}
	}
	fmt.Fprintf(w, "%s and %s: %d of %d specs differ\n", a, b, diffs, len(specs))
	return diffs
}
