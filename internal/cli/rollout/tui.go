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

// viewMsg carries a fresh view (or the error reading it) to the terminal view.
type viewMsg struct {
	v   *view
	err error
}

// tuiModel is the bubbletea model of the live view: the latest view, drawn
// with one progress bar per ReplicaSet (available of the Deployment's
// replicas; the counts beside it).
type tuiModel struct {
	v       *view
	err     error
	stopped bool
	bar     progress.Model
	// width is the terminal's, in cells (0 until bubbletea reports it):
	// why-lines wrap at it so that every stuck pod's name shows.
	width int
}

func (m tuiModel) Init() tea.Cmd { return nil }

func (m tuiModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case viewMsg:
		if msg.err != nil {
			m.err = msg.err
			return m, tea.Quit
		}
		m.v = msg.v
		if done, _ := outcome(m.v); done {
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			m.stopped = true
			return m, tea.Quit
		}
	}
	return m, nil
}

func (m tuiModel) View() string {
	v := m.v
	var b strings.Builder
	b.WriteString(titleStyle.Render(v.summary()))
	b.WriteByte('\n')
	var conds []string
	for _, c := range v.d.Status.Conditions {
		style := goodStyle
		if c.Status != "True" || c.Reason == rolloutstate.ProgressDeadlineExceeded {
			style = badStyle
		}
		conds = append(conds, style.Render(fmt.Sprintf("%s=%s", c.Type, c.Status))+dimStyle.Render(" "+c.Reason))
	}
	if len(conds) > 0 {
		b.WriteString(strings.Join(conds, "  "))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	var rows []*appsv1.ReplicaSet
	if v.newRS != nil {
		rows = append(rows, v.newRS)
	}
	rows = append(rows, v.oldRSs...)
	nameWidth := 0
	for _, rs := range rows {
		nameWidth = max(nameWidth, len(rs.Name))
	}
	for _, rs := range rows {
		kind, style := "old", dimStyle
		if rs == v.newRS {
			kind, style = "new", newRSStyle
		}
		rev := rs.Annotations[rolloutstate.RevisionAnnotation]
		label := style.Render(fmt.Sprintf("%s %-*s rev %-3s", kind, nameWidth, rs.Name, rev))
		fraction := 0.0
		if v.replicas > 0 {
			fraction = min(1, float64(rs.Status.AvailableReplicas)/float64(v.replicas))
		}
		fmt.Fprintf(&b, "%s %s  %d desired  %d ready  %d available\n", label, m.bar.ViewAs(fraction), rolloutstate.ReplicaSetReplicas(rs), rs.Status.ReadyReplicas, rs.Status.AvailableReplicas)
	}
	if len(v.stuck) > 0 {
		b.WriteString("\n" + headingStyle.Render("why the new ReplicaSet's pods are not available") + "\n")
		for _, g := range v.stuck {
			style := warnStyle
			switch g.Reason {
			case "NotReady", "MinReadySeconds", "Pending", "Terminating", "ContainerCreating":
				style = dimStyle
			}
			b.WriteString(m.wrap(style, 2, whyLine(g)))
			if g.Message != "" {
				b.WriteString(m.wrap(dimStyle, 4, g.Message))
			}
		}
	}
	if len(v.events) > 0 {
		b.WriteString("\n" + headingStyle.Render("events") + "\n")
		for _, e := range v.events {
			style := lipgloss.NewStyle()
			if e.Type == v1.EventTypeWarning {
				style = badStyle
			}
			b.WriteString(m.wrap(style, 2, eventTime(e).Local().Format("15:04:05")+" "+eventLine(e)))
		}
	}
	if m.stopped || m.err != nil {
		return b.String()
	}
	if done, _ := outcome(v); !done {
		b.WriteString("\n" + dimStyle.Render("q: stop watching") + "\n")
	}
	return b.String()
}

// wrap renders text in style, indented by indent cells and wrapped at the
// terminal's width (bubbletea would cut a longer line), ending in a newline.
func (m tuiModel) wrap(style lipgloss.Style, indent int, text string) string {
	if m.width > indent+20 {
		style = style.Width(m.width - indent - 1)
	}
	return lipgloss.NewStyle().PaddingLeft(indent).Render(style.Render(text)) + "\n"
}

// runTerminal runs the live view on out until the rollout ends (see
// outcome), the user stops it (errStopped) or ctx ends (timed out).
func runTerminal(ctx context.Context, f *follower, o *watchOptions, out io.Writer) error {
	first, err := f.view(o.events, time.Now())
	if err != nil {
		return err
	}
	m := tuiModel{v: first, bar: progress.New(progress.WithDefaultGradient(), progress.WithWidth(barWidth), progress.WithoutPercentage())}
	opts := []tea.ProgramOption{tea.WithOutput(out), tea.WithContext(ctx)}
	if !terminal(os.Stdin) {
		opts = append(opts, tea.WithInput(nil))
	}
	p := tea.NewProgram(m, opts...)

	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	go func() {
		tick := time.NewTicker(refreshInterval)
		defer tick.Stop()
		for {
			select {
			case <-feedCtx.Done():
				return
			case <-f.changed:
			case <-tick.C:
			}
			v, err := f.view(o.events, time.Now())
			p.Send(viewMsg{v: v, err: err})
			if err != nil {
				return
			}
		}
	}()
	if done, _ := outcome(first); done {
		go p.Send(viewMsg{v: first})
	}

	final, runErr := p.Run()
	stopFeed()
	fm, _ := final.(tuiModel)
	switch {
	case ctx.Err() != nil:
		return timedOut(f.ns, f.name)
	case errors.Is(runErr, tea.ErrInterrupted):
		return errStopped
	case runErr != nil:
		return fmt.Errorf("terminal view: %w", runErr)
	case fm.err != nil:
		return fm.err
	case fm.stopped:
		return errStopped
	}
	done, err := outcome(fm.v)
	if done && err == nil {
		fmt.Fprintln(out, fm.v.ended())
	}
	if !done {
		return errStopped
	}
	return err
}
