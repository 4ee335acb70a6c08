package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/watcher"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// The terminal view's styles (lipgloss picks the colours the terminal has).
var (
	titleStyle   = lipgloss.NewStyle().Bold(true)
	dimStyle     = lipgloss.NewStyle().Faint(true)
	goodStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	badStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	warnStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	newRSStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("6")).Bold(true)
	headingStyle = lipgloss.NewStyle().Underline(true)
)

// barWidth is the width of a ReplicaSet's progress bar, in cells.
const barWidth = 30

// modelMsg carries a fresh view model (or the error reading it) to the
// terminal view.
type modelMsg struct {
	m   *viewmodel.Model
	err error
}

// tuiModel is the bubbletea model of the live view: the latest view model,
// drawn with one progress bar per ReplicaSet (available of the
// Deployment's replicas; the counts beside it).
type tuiModel struct {
	m       *viewmodel.Model
	err     error
	stopped bool
	bar     progress.Model
	// width is the terminal's, in cells (0 until bubbletea reports it):
	// why-lines wrap at it so that every stuck pod's name shows.
	width int
	// keys, when set (the view reads a terminal), promote or abort a rollout held at a pause step (EX-5); the
	// view then stays open at such a hold. said is what the last key did, or its error.
	keys *stepKeys
	said string
}

func newTUIModel(first *viewmodel.Model, keys *stepKeys) tuiModel {
	return tuiModel{m: first, keys: keys, bar: progress.New(progress.WithDefaultGradient(), progress.WithWidth(barWidth), progress.WithoutPercentage())}
}

// stepKeys promote or abort the rollout of Deployment ns/name from the terminal view, as `rollout promote` and
// `rollout abort` do (applyStep), under ctx.
type stepKeys struct {
	ctx      context.Context
	client   kubernetes.Interface
	ns, name string
}

// saidMsg is what a key's action said, or its error.
type saidMsg struct {
	said string
	err  error
}

// run returns the command that applies decide as annotation key.
func (k *stepKeys) run(key string, decide stepDecision) tea.Cmd {
	return func() tea.Msg {
		said, err := applyStep(k.ctx, k.client, k.ns, k.name, key, decide)
		return saidMsg{said: said, err: err}
	}
}

// heldAtStep reports whether m's Deployment is held for a human: by a pause step (EX-5: Progressing reason
// RolloutStepPaused) or by an analysis that paused it (EX-6: RolloutAnalysisPaused). promote goes on, abort rolls
// back, either way.
func heldAtStep(m *viewmodel.Model) bool {
	c := rolloutstate.Condition(&m.Deployment.Status, appsv1.DeploymentProgressing)
	return c != nil && (c.Reason == rolloutstate.RolloutStepPaused || c.Reason == rolloutstate.RolloutAnalysisPaused) &&
		m.Phase != rolloutstate.PhaseComplete
}

// offersKeys reports whether the view offers the step keys now.
func (t tuiModel) offersKeys() bool { return t.keys != nil && heldAtStep(t.m) }

func (t tuiModel) Init() tea.Cmd { return nil }

// Update takes a new model (quitting once the rollout ended or reading
// failed), the terminal's width, and q, Esc or Ctrl-C (stop watching).
func (t tuiModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case modelMsg:
		if msg.err != nil {
			t.err = msg.err
			return t, tea.Quit
		}
		t.m = msg.m
		if done, _ := t.m.Outcome(); done && !t.offersKeys() {
			return t, tea.Quit
		}
	case tea.WindowSizeMsg:
		t.width = msg.Width
	case saidMsg:
		t.said = msg.said
		if msg.err != nil {
			t.said = "error: " + msg.err.Error()
		}
	case tea.KeyMsg:
		switch key := msg.String(); {
		case t.offersKeys() && (key == "p" || key == "f"):
			full := key == "f"
			return t, t.keys.run(rolloutstate.RolloutPromoteAnnotation, func(d *appsv1.Deployment, rev int64) (string, string, error) {
				return promote(d, rev, full)
			})
		case t.offersKeys() && key == "a":
			return t, t.keys.run(rolloutstate.RolloutAbortAnnotation, abort)
		case key == "q" || key == "esc" || key == "ctrl+c":
			t.stopped = true
			return t, tea.Quit
		}
	}
	return t, nil
}

// headerView is the view's head: the summary, the conditions (red when not healthy) and the verdict
// (rolloutstate.Verdict; red when failed or stuck on an invalid value), then a blank line.
func headerView(m *viewmodel.Model) string {
	var b strings.Builder
	b.WriteString(titleStyle.Render(m.Summary()))
	b.WriteByte('\n')
	var conds []string
	for _, c := range m.Deployment.Status.Conditions {
		style := goodStyle
		if !viewmodel.Healthy(c) {
			style = badStyle
		}
		conds = append(conds, style.Render(fmt.Sprintf("%s=%s", c.Type, c.Status))+dimStyle.Render(" "+c.Reason))
	}
	if len(conds) > 0 {
		b.WriteString(strings.Join(conds, "  "))
		b.WriteByte('\n')
	}
	verdictStyle := goodStyle
	if m.Phase == rolloutstate.PhaseFailed || m.Phase == rolloutstate.PhaseInvalid {
		verdictStyle = badStyle
	}
	b.WriteString(verdictStyle.Render("rollout " + m.Verdict.Summary))
	b.WriteString("\n\n")
	return b.String()
}

// View draws the summary, the conditions, the verdict (rolloutstate.Verdict), a bar per ReplicaSet, the spread,
// the analyses, the why-groups and the events, and offers q while the rollout goes on (and p, f and a while it
// is held for a human).
func (t tuiModel) View() string {
	m := t.m
	var b strings.Builder
	b.WriteString(headerView(m))
	nameWidth := 0
	for _, rs := range m.ReplicaSets {
		nameWidth = max(nameWidth, len(rs.Name))
	}
	for _, rs := range m.ReplicaSets {
		kind, style := "old", dimStyle
		if rs.New {
			kind, style = "new", newRSStyle
		}
		label := style.Render(fmt.Sprintf("%s %-*s rev %-3s", kind, nameWidth, rs.Name, rs.Revision))
		fmt.Fprintf(&b, "%s %s  %d desired  %d ready  %d available\n", label, t.bar.ViewAs(rs.Fraction), rs.Desired, rs.Ready, rs.Available)
	}
	b.WriteString(t.spreadView(m))
	b.WriteString(t.analysisView(m))
	if len(m.Stuck) > 0 {
		b.WriteString("\n" + headingStyle.Render("why the new ReplicaSet's pods are not available") + "\n")
		for _, g := range m.Stuck {
			style := warnStyle
			if viewmodel.Passing(g) {
				style = dimStyle
			}
			b.WriteString(t.wrap(style, 2, viewmodel.WhyLine(g)))
			if g.Message != "" {
				b.WriteString(t.wrap(dimStyle, 4, g.Message))
			}
		}
	}
	if len(m.Events) > 0 {
		b.WriteString("\n" + headingStyle.Render("events") + "\n")
		for _, e := range m.Events {
			style := lipgloss.NewStyle()
			if e.Type == v1.EventTypeWarning {
				style = badStyle
			}
			b.WriteString(t.wrap(style, 2, viewmodel.EventTime(e).Local().Format("15:04:05")+" "+viewmodel.EventLine(e)))
		}
	}
	if t.stopped || t.err != nil {
		return b.String()
	}
	if t.said != "" {
		b.WriteString("\n" + t.wrap(titleStyle, 0, t.said))
	}
	switch done, _ := m.Outcome(); {
	case t.offersKeys():
		b.WriteString("\n" + dimStyle.Render("p: promote  f: promote --full  a: abort  q: stop watching") + "\n")
	case !done:
		b.WriteString("\n" + dimStyle.Render("q: stop watching") + "\n")
	}
	return b.String()
}

// spreadView draws m's spread across topology domains (EX-4), "" without one: dim, in warning colours when the
// annotation cannot be used or the skew is over 1.
func (t tuiModel) spreadView(m *viewmodel.Model) string {
	if m.Spread == nil {
		return ""
	}
	style := dimStyle
	if m.Spread.Err != nil || m.Spread.Skew > 1 {
		style = warnStyle
	}
	return "\n" + t.wrap(style, 0, m.Spread.Line())
}

// analysisView draws m's analyses (EX-6), "" without any: per run its header (warning colours while it waits
// for a human, red once failed), then its metrics, each coloured by its last measurement's phase.
func (t tuiModel) analysisView(m *viewmodel.Model) string {
	if m.Analysis == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range m.Analysis.Runs {
		style := titleStyle
		switch {
		case r.Phase == rolloutstate.AnalysisFailed:
			style = badStyle
		case r.WaitsForHuman(m.Analysis.Paused):
			style = warnStyle
		}
		b.WriteString("\n" + t.wrap(style, 0, r.Header(m.Deployment.Name, m.Analysis.Paused)))
		for i, line := range r.MetricLines() {
			b.WriteString(t.wrap(measurementStyle(r.Metrics[i].Last), 2, line))
		}
	}
	return b.String()
}

// measurementStyle is the style of a metric whose last measurement is last (nil: none yet).
func measurementStyle(last *rolloutstate.Measurement) lipgloss.Style {
	switch {
	case last == nil:
		return dimStyle
	case last.Phase == rolloutstate.MeasurementSuccessful:
		return goodStyle
	case last.Phase == rolloutstate.MeasurementFailed:
		return badStyle
	}
	return warnStyle
}

// wrap renders text in style, indented by indent cells and wrapped at the
// terminal's width (bubbletea would cut a longer line), ending in a newline.
func (t tuiModel) wrap(style lipgloss.Style, indent int, text string) string {
	if t.width > indent+20 {
		style = style.Width(t.width - indent - 1)
	}
	return lipgloss.NewStyle().PaddingLeft(indent).Render(style.Render(text)) + "\n"
}

// runTerminal runs the live view on out until the rollout ends (see
// viewmodel.Model.Outcome; with keys, read from a terminal, not at a pause step, where it offers them: p
// promotes, f promotes --full, a aborts), the user stops it (errStopped) or ctx ends (ctx's error).
func runTerminal(ctx context.Context, w *watcher.Watcher, o *watchOptions, out io.Writer, keys *stepKeys) error {
	in, err := w.Input(o.events)
	if err != nil {
		return err
	}
	opts := []tea.ProgramOption{tea.WithOutput(out), tea.WithContext(ctx)}
	if !terminal(os.Stdin) {
		opts = append(opts, tea.WithInput(nil))
		keys = nil // no key can come
	}
	p := tea.NewProgram(newTUIModel(viewmodel.Build(in, o.clockOrReal().Now()), keys), opts...)

	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go func() {
		err := eachModel(feedCtx, w, o, func(m *viewmodel.Model, _ time.Time) (bool, error) {
			p.Send(modelMsg{m: m})
			return false, nil
		})
		if feedCtx.Err() == nil {
			p.Send(modelMsg{err: err})
		}
	}()
	final, runErr := p.Run()
	stopFeed()
	return terminalOutcome(ctx, final, runErr, out)
}

// terminalOutcome turns how the terminal view ended into watch's result,
// printing the last line of a rollout that ended well.
func terminalOutcome(ctx context.Context, final tea.Model, runErr error, out io.Writer) error {
	t, _ := final.(tuiModel)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(runErr, tea.ErrInterrupted):
		return errStopped
	case runErr != nil:
		return fmt.Errorf("terminal view: %w", runErr)
	case t.err != nil:
		return t.err
	case t.stopped || t.m == nil:
		return errStopped
	}
	done, err := t.m.Outcome()
	if !done {
		return errStopped
	}
	if err == nil {
		fmt.Fprintln(out, t.m.Ended())
	}
	return err
}
