package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// spec builds the report of one "It" spec under containers.
func spec(state types.SpecState, runTime time.Duration, message string, containers []string, leaf string) types.SpecReport {
	r := types.SpecReport{ContainerHierarchyTexts: containers, LeafNodeText: leaf, LeafNodeType: types.NodeTypeIt,
		State: state, RunTime: runTime}
	if message != "" {
		r.Failure = types.Failure{Message: message}
	}
	return r
}

// reportJSON is ginkgo's --ginkgo.json-report for specs, as the e2e binary writes it.
func reportJSON(t *testing.T, specs ...types.SpecReport) *bytes.Buffer {
	t.Helper()
	b, err := json.Marshal([]types.Report{{SuiteDescription: suiteDescription, SpecReports: specs}})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewBuffer(b)
}

// TestReadReport: only the focus's "It" specs count, each with its outcome and why; ours and the spec's own
// skip reasons are told apart.
func TestReadReport(t *testing.T) {
	deploy := []string{"[sig-apps] Deployment"}
	rs := []string{"[sig-apps] ReplicaSet"}
	skipped := simulatedPodSkips[0].spec
	in := reportJSON(t,
		spec(types.SpecStatePassed, 12*time.Second, "", deploy, "deployment should delete old replica sets [Conformance]"),
		spec(types.SpecStateFailed, 3*time.Second, "timed out waiting\nmore detail", deploy, "deployment should support rollover [Conformance]"),
		spec(types.SpecStateSkipped, 0, "Only supported for providers [aws azure gce] (not skeleton)", deploy, "should not disrupt a cloud load-balancer's connectivity during rollout"),
		spec(types.SpecStateSkipped, 0, "", rs, strings.TrimPrefix(skipped, "[sig-apps] ReplicaSet ")),
		spec(types.SpecStateSkipped, 0, "", deploy, "should survive a restart [Serial]"),
		spec(types.SpecStatePassed, time.Second, "", []string{"[sig-apps] ReplicationController"}, "should serve a basic image"),
		spec(types.SpecStatePassed, time.Second, "", []string{"[sig-apps] DaemonSet"}, "should run"),
		types.SpecReport{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStatePassed},
	)
	got, err := readReport(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Spec: "[sig-apps] Deployment deployment should delete old replica sets [Conformance]", Outcome: Passed, Took: 12 * time.Second},
		{Spec: "[sig-apps] Deployment deployment should support rollover [Conformance]", Outcome: Failed, Took: 3 * time.Second, Why: "timed out waiting"},
		{Spec: "[sig-apps] Deployment should not disrupt a cloud load-balancer's connectivity during rollout", Outcome: Skipped,
			Why: "skipped by the spec: Only supported for providers [aws azure gce] (not skeleton)"},
		{Spec: "[sig-apps] Deployment should survive a restart [Serial]", Outcome: Skipped, Why: "skipped: [Serial]"},
		{Spec: skipped, Outcome: Skipped, Why: "skipped by name: " + simulatedPodSkips[0].reason},
	}
	if len(got) != len(want) {
		t.Fatalf("readReport = %d results %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if c := count(got); c != (Totals{Passed: 1, Failed: 1, Skipped: 3}) {
		t.Errorf("count = %+v", c)
	}
}

func TestReadReportRejectsGarbage(t *testing.T) {
	if _, err := readReport(strings.NewReader("<html>")); err == nil {
		t.Fatal("readReport accepted a non-JSON report")
	}
	if _, err := readReport(strings.NewReader(`[{"SuiteDescription":"another suite"}]`)); err == nil || !strings.Contains(err.Error(), "another suite") {
		t.Fatalf("readReport of another suite: %v, want an error naming it", err)
	}
}

// TestSkipRegexp: the skip expression skips the tagged specs and exactly the named ones, not specs whose text merely
// contains a named one.
func TestSkipRegexp(t *testing.T) {
	re := regexp.MustCompile(skipRegexp())
	named := simulatedPodSkips[0].spec
	// Ginkgo matches the suite's description, a space and the spec's full text.
	for text, want := range map[string]bool{
		named: true,
		"[sig-apps] Deployment should survive a restart [Serial]":                        true,
		"[sig-apps] Deployment should break things [Disruptive]":                         true,
		"[sig-apps] ReplicaSet sometimes works [Flaky]":                                  true,
		"[sig-apps] Deployment deployment should delete old replica sets [Conformance]":  false,
		"[sig-apps] ReplicaSet should serve a basic image on each replica with a public": false,
		named + " again":    false,
		"prefix " + named:   false,
		"[sig-apps] Serial": false,
	} {
		if got := re.MatchString(suiteDescription + " " + text); got != want {
			t.Errorf("skip %q = %v, want %v", text, got, want)
		}
	}
	focusRE, ginkgoRE := regexp.MustCompile(focus), regexp.MustCompile(ginkgoFocus())
	for text, want := range map[string]bool{
		"[sig-apps] Deployment deployment should delete old replica sets [Conformance]": true,
		"[sig-apps] ReplicaSet should adopt matching pods on creation":                  true,
		"[sig-apps] ReplicationController should serve a basic image":                   false,
		"[sig-apps] DaemonSet should run":                                               false,
		"[sig-apps] StatefulSet Deployment-like":                                        false,
	} {
		if got := focusRE.MatchString(text); got != want {
			t.Errorf("focus %q = %v, want %v", text, got, want)
		}
		if got := ginkgoRE.MatchString(suiteDescription + " " + text); got != want {
			t.Errorf("ginkgo focus %q = %v, want %v", text, got, want)
		}
	}
}

// TestCheck: a run passes only with no failure, at least one pass and every named skip still in the suite.
func TestCheck(t *testing.T) {
	named := Result{Spec: simulatedPodSkips[0].spec, Outcome: Skipped}
	pass := Result{Spec: "[sig-apps] Deployment a", Outcome: Passed}
	fail := Result{Spec: "[sig-apps] Deployment b", Outcome: Failed}
	for _, tc := range []struct {
		name    string
		results []Result
		wantErr string
	}{
		{name: "pass", results: []Result{pass, named}},
		{name: "a failure", results: []Result{pass, fail, named}, wantErr: "1 of 3 specs failed"},
		{name: "nothing passed", results: []Result{named}, wantErr: "no spec passed"},
		{name: "named skip gone from the suite", results: []Result{pass}, wantErr: "the suite has no spec"},
	} {
		err := check(tc.results)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: check = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestCompare names every spec whose outcome differs between the sides, including one only a side ran.
func TestCompare(t *testing.T) {
	a := []Result{{Spec: "x", Outcome: Passed}, {Spec: "y", Outcome: Failed}, {Spec: "z", Outcome: Skipped}}
	b := []Result{{Spec: "x", Outcome: Passed}, {Spec: "y", Outcome: Passed}, {Spec: "w", Outcome: Passed}}
	var out bytes.Buffer
	if n := compare(&out, "kubedeploy", "upstream", a, b); n != 3 {
		t.Errorf("compare = %d differences, want 3 (w, y, z):\n%s", n, out.String())
	}
	for _, want := range []string{"differs: w: kubedeploy absent, upstream PASS", "differs: y: kubedeploy FAIL, upstream PASS",
		"differs: z: kubedeploy SKIP, upstream absent", "3 of 4 specs differ"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("compare output lacks %q:\n%s", want, out.String())
		}
	}
}
