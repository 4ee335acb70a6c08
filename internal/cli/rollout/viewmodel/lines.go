package viewmodel

import (
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// Summary is the view's first line: the Deployment's updated, available
// and total pods against its replicas, and "(paused)".
func (m *Model) Summary() string {
	s := m.Deployment.Status
	line := fmt.Sprintf("deployment/%s: %d/%d updated, %d available, %d total", m.Deployment.Name, s.UpdatedReplicas, m.Replicas, s.AvailableReplicas, s.Replicas)
	if m.Deployment.Spec.Paused {
		line += " (paused)"
	}
	return line
}

// Healthy reports whether a Deployment condition is as it should be: True,
// and not the deadline's reason.
func Healthy(c appsv1.DeploymentCondition) bool {
	return c.Status == v1.ConditionTrue && c.Reason != rolloutstate.ProgressDeadlineExceeded
}

// Passing reports whether pods of a why-group wait on something a rollout
// goes through by itself (scheduling, container creation, readiness,
// minReadySeconds, termination) rather than on something that needs a
// person (an image that cannot be pulled, a crash, no room to schedule).
func Passing(g unavailable.Group) bool {
	switch g.Reason {
	case unavailable.NotReady, unavailable.MinReadySeconds, unavailable.Pending, unavailable.Terminating, unavailable.ContainerCreating:
		return true
	}
	return false
}

// WhyLine is one why-group: the count, the reason and up to MaxPodNames pod
// names, "2 ImagePullBackOff: web-a, web-b".
func WhyLine(g unavailable.Group) string {
	names, more := g.Pods, ""
	if len(names) > MaxPodNames {
		names, more = names[:MaxPodNames], fmt.Sprintf(" and %d more", len(g.Pods)-MaxPodNames)
	}
	return fmt.Sprintf("%d %s: %s%s", len(g.Pods), g.Reason, strings.Join(names, ", "), more)
}

// EventLine is one event: "Normal ScalingReplicaSet: Scaled up ...".
func EventLine(e v1.Event) string {
	return fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
}

// Lines is the model as plain lines, without a time stamp: the summary with
// the conditions, the verdict (rolloutstate.Verdict's Summary), a line per ReplicaSet, the spread (EX-4), the
// analyses (EX-6: a line per run and per metric), a why-line per group (with the first pod's message when
// messages is set) and a line per event.
func (m *Model) Lines(messages bool) string {
	if !messages {
		return m.lines(nil)
	}
	return m.lines(func(msg string) string { return msg })
}

// LinesWithoutAges is Lines(true) with every duration in the why-messages
// written "…" ("not Ready after …", "Ready for … of minReadySeconds …"):
// those are ages, which change every second while nothing else does.
// `rollout watch` prints a new plain block when it changes, that is when
// anything else Lines(true) shows changes, a why-message included.
func (m *Model) LinesWithoutAges() string {
	return m.lines(withoutAges)
}

// lines renders Lines, each why-group's message through message (nil: no
// messages).
func (m *Model) lines(message func(string) string) string {
	var b strings.Builder
	b.WriteString(m.Summary())
	for _, c := range m.Deployment.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Reason)
	}
	fmt.Fprintf(&b, "\n  rollout %s", m.Verdict.Summary)
	for _, rs := range m.ReplicaSets {
		kind := "old"
		if rs.New {
			kind = "new"
		}
		fmt.Fprintf(&b, "\n  %s %s: %d desired, %d ready, %d available", kind, rs.Name, rs.Desired, rs.Ready, rs.Available)
	}
	if m.Spread != nil {
		fmt.Fprintf(&b, "\n  %s", m.Spread.Line())
	}
	m.Analysis.lines(&b, m.Deployment.Name)
	for _, g := range m.Stuck {
		fmt.Fprintf(&b, "\n  why: %s", WhyLine(g))
		if message != nil && g.Message != "" {
			fmt.Fprintf(&b, " (%s)", message(g.Message))
		}
	}
	for _, e := range m.Events {
		fmt.Fprintf(&b, "\n  event: %s", EventLine(e))
	}
	return b.String()
}

// duration matches a whole time.Duration as Go prints one ("0s", "12s",
// "1m5s", "1h2m3.5s", "250ms").
var duration = regexp.MustCompile(`^(?:\d+(?:\.\d+)?(?:ms|us|µs|ns|h|m|s))+$`)

// withoutAges returns msg with each space-separated word that is a
// duration (give or take brackets and trailing punctuation) written "…".
// A duration inside a word (an image tag "1.9.3s", a name "web-5m") stays.
func withoutAges(msg string) string {
	words := strings.Split(msg, " ")
	for i, w := range words {
		core := strings.TrimLeft(w, "([")
		core = strings.TrimRight(core, ",;:)]")
		if core != "" && duration.MatchString(core) {
			words[i] = strings.Replace(w, core, "…", 1)
		}
	}
	return strings.Join(words, " ")
}
