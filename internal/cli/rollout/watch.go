package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/cli/cliargs"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/timeline"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/watcher"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// refreshInterval is how often `rollout watch` redraws with nothing new from
// its watches, so that ages ("not Ready after 12s") stay current.
const refreshInterval = time.Second

// plainInterval is the least time between two plain blocks: changes that
// come sooner are folded into the next block (a rollout's first second can
// change the view twenty times).
const plainInterval = time.Second

// watchOptions are `rollout watch`'s flags, and its clock.
type watchOptions struct {
	timeout  time.Duration
	events   int
	timeline string
	plain    bool
	// clock stamps the plain blocks, ages the why-messages and paces the
	// redraws; nil is the real one.
	clock clock.WithTicker
}

func newWatchCommand(c *clusterFlags) *cobra.Command {
	o := &watchOptions{}
	cmd := &cobra.Command{
		Use:   "watch deploy/NAME [--timeline FILE.png|FILE.svg] [--timeout D]",
		Short: "Follow a Deployment's rollout until it completes or fails, and say why it is stuck",
		Long: `Follows the rollout of a Deployment: its ReplicaSets (desired, ready, available), its
conditions, the latest events, and why it is stuck: the new ReplicaSet's pods that are not
available, grouped by reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable, not Ready
after N s, ...) with their names and the first one's message. At an analysis step, and
with kubedeploy.io/rollout-analysis, it shows each metric's last value, phase and counts
(with its conditions when it can read the analysis templates' ConfigMaps) and, when an
analysis paused the rollout for a human, the commands that end the wait.

On a terminal it is a live view with one progress bar per ReplicaSet (q or Ctrl-C stops
watching; at a pause step or an analysis paused for a human, p promotes, f promotes
--full, a aborts). Piped, or with --plain, it prints a block of plain lines whenever something
changes, each event in one block only.

With --timeline it also records the rollout from the moment it starts watching and, when it
ends, writes a picture of it (PNG or SVG, by the file's extension): every ReplicaSet's size
and the Deployment's available replicas over time, the surge and availability bounds, and
the events.

It exits 0 when the rollout is complete or held by its kubedeploy.io/rollout-partition,
1 when the Deployment reports ProgressDeadlineExceeded (or was rolled back automatically)
or --timeout passes, like "kubectl rollout status", or when you stop it first (q, Ctrl-C),
and 3 while a kubedeploy.io/ value that does not parse holds the rollout (the line before
says which annotation, its value and what it wants).`,
		Example: `  kubedeploy rollout watch deploy/nginx-deployment
  kubedeploy kubectl set image deploy/nginx-deployment nginx-deployment=nginx:1.9.3 && \
    kubedeploy rollout watch deploy/nginx-deployment --timeline rollout.png
  kubedeploy rollout watch deploy/nginx-deployment --timeout 5m --plain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, c, args[0])
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "give up (exit 1) after this long; 0 waits for completion or the progress deadline")
	cmd.Flags().IntVar(&o.events, "events", 3, "how many of the latest events to show")
	cmd.Flags().StringVar(&o.timeline, "timeline", "", "when the watch ends, write a picture of the rollout to this .png or .svg file")
	cmd.Flags().BoolVar(&o.plain, "plain", false, "print plain lines even on a terminal")
	return cmd
}

// run checks the flags and the Deployment's name (arg) and watches its rollout in the cluster of c, until
// --timeout when set (watchRollout).
func (o *watchOptions) run(cmd *cobra.Command, c *clusterFlags, arg string) error {
	if err := o.check(); err != nil {
		return err
	}
	name, err := deploymentName(arg)
	if err != nil {
		return err
	}
	if o.timeline != "" {
		// Refuse a bad --timeline before recording a whole rollout.
		if err := timeline.CheckPath(o.timeline); err != nil {
			return err
		}
	}
	client, ns, err := c.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	return watchRollout(ctx, client, ns, name, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

// check returns the first of watch's flags out of range: a negative --timeout (which would end the watch at
// once, as a timeout) or --events.
func (o *watchOptions) check() error {
	return cliargs.First(cliargs.AtLeast("--timeout", o.timeout, 0), cliargs.AtLeast("--events", o.events, 0))
}

// spreadShown reports whether the view shows d's spread across topology domains: d is annotated
// kubedeploy.io/scale-down-spread (EX-4) and nodes can be listed. When they cannot (a user without list on
// nodes), it says so on errOut and the watch goes on without the spread.
func spreadShown(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, errOut io.Writer) bool {
	if d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] == "" {
		return false
	}
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		fmt.Fprintf(errOut, "Not showing the spread across %s: listing nodes: %v\n", d.Annotations[rolloutstate.ScaleDownSpreadAnnotation], err)
		return false
	}
	return true
}

// analysisTemplatesShown reports whether the view reads the analysis templates of d's namespace, for the counts
// and conditions of its analyses' metrics (EX-6): d's rollouts may run analyses (viewmodel.UsesAnalysis) and
// the templates can be listed. When they cannot (a user without list on configmaps), it says so on errOut and
// the watch goes on with the recorded measurements alone.
func analysisTemplatesShown(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, errOut io.Writer) bool {
	if !viewmodel.UsesAnalysis(d) {
		return false
	}
	if _, err := client.CoreV1().ConfigMaps(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: watcher.AnalysisTemplateSelector, Limit: 1}); err != nil {
		fmt.Fprintf(errOut, "Not showing the analysis metrics' counts and conditions: listing analysis templates: %v\n", err)
		return false
	}
	return true
}

// errStopped is returned when the user stops the watch before the rollout ended: q or Ctrl-C in the terminal
// view, Ctrl-C (SIGINT, or SIGTERM: main cancels the command's context) in either view.
var errStopped = errors.New("stopped watching before the rollout ended")

// watchRollout follows the Deployment ns/name with a watcher until the
// rollout ends as viewmodel.Model.Outcome says: nil when complete or held,
// an error wrapping viewmodel.ErrDeadline when it failed or was rolled
// back, or when ctx ends (watchEnded) an error saying it timed out or
// errStopped. A Deployment that does not exist is an error naming
// ns/name. When out is a
// terminal (and o.plain is unset) it runs the live view, else it prints a
// plain block whenever the view changes. With o.timeline it writes the
// recorded picture at the end, whatever the outcome, and says so on errOut.
func watchRollout(ctx context.Context, client kubernetes.Interface, ns, name string, o *watchOptions, out, errOut io.Writer) error {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err != nil && ctx.Err() != nil:
		return watchEnded(ctx, ns, name)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("deployment %s/%s not found", ns, name)
	case err != nil:
		return err
	}
	cfg := watcher.Config{Events: o.events > 0, Nodes: spreadShown(ctx, client, d, errOut),
		AnalysisTemplates: analysisTemplatesShown(ctx, client, d, errOut), Clock: o.clockOrReal()}
	var rec *timeline.Recorder
	if o.timeline != "" {
		rec = timeline.NewRecorder(d)
		cfg.Events, cfg.Observer = true, rec
	}
	// The informers stop with this context; Shutdown waits for them.
	wctx, cancel := context.WithCancel(ctx)
	w, err := watcher.Start(wctx, client, d, cfg)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return watchEnded(ctx, ns, name)
		}
		return err
	}
	defer func() {
		cancel()
		w.Shutdown()
	}()
	if terminal(out) && !o.plain {
		err = runTerminal(ctx, w, o, out, &stepKeys{ctx: ctx, client: client, ns: ns, name: name})
	} else {
		err = runPlain(ctx, w, o, out)
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = watchEnded(ctx, ns, name)
	}
	if rec != nil {
		w.Flush()
		r := rec.Recording(o.clockOrReal().Now())
		if werr := timeline.Write(o.timeline, r); werr != nil {
			return errors.Join(err, fmt.Errorf("timeline: %w", werr))
		}
		fmt.Fprintf(errOut, "wrote the rollout's timeline (%d changes, %d events) to %s\n", len(r.Samples), len(r.Events), o.timeline)
	}
	return err
}

// terminal reports whether out is a terminal.
func terminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// watchEnded returns the watch's error for ctx, which ended before the rollout of ns/name did: it timed out
// when --timeout's deadline passed, else the user stopped it (errStopped, the terminal view's words): main
// cancels the command's context on Ctrl-C.
func watchEnded(ctx context.Context, ns, name string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("deployment %s/%s: timed out waiting for the rollout", ns, name)
	}
	return errStopped
}

// eachModel calls show with the model of what w holds now, and the time it
// was built at (o's clock), then again after every change w signals and
// every refreshInterval (so that ages stay current), until show says stop
// (returning its error), building a model fails, or ctx ends (ctx's error).
// The models' events are those of the current rollout, whose start a
// viewmodel.StartTracker follows across the looks.
func eachModel(ctx context.Context, w *watcher.Watcher, o *watchOptions, show func(*viewmodel.Model, time.Time) (stop bool, err error)) error {
	clk := o.clockOrReal()
	tick := clk.NewTicker(refreshInterval)
	defer tick.Stop()
	var start viewmodel.StartTracker
	for {
		in, err := w.Input(o.events)
		if err != nil {
			return err
		}
		now := clk.Now()
		in.RolloutStart = start.Observe(in.Deployment, in.ReplicaSets, now)
		if stop, err := show(viewmodel.Build(in, now), now); stop {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Changed():
		case <-tick.C():
		}
	}
}

// clockOrReal returns o's clock, the real one when it has none.
func (o *watchOptions) clockOrReal() clock.WithTicker {
	if o.clock == nil {
		return clock.RealClock{}
	}
	return o.clock
}

// runPlain prints the plain view (plainView) until the rollout ends, then
// any change it held back.
func runPlain(ctx context.Context, w *watcher.Watcher, o *watchOptions, out io.Writer) error {
	p := &plainView{out: out}
	err := eachModel(ctx, w, o, p.show)
	p.flush()
	return err
}

// plainView is `rollout watch`'s output when piped or --plain: blocks of
// Model.Lines(true), the first line stamped with the time (15:04:05, the
// clock's zone: local for the real one), each with only the events no
// earlier block printed: the model holds the latest events, so consecutive
// blocks would repeat them (issue 44).
// A block is printed only when what it shows changed: the comparison is of
// Model.LinesWithoutAges, every line as shown but with the durations in
// why-messages ("not Ready after 12s") left out, so that ages ticking
// alone print nothing (a block shows the ages as of its stamp). Blocks are
// at least plainInterval apart: a change that comes sooner is held and
// printed by the next look after that (eachModel looks every
// refreshInterval), unless a later one replaces it or it is undone.
type plainView struct {
	out io.Writer
	// shown is the last block's LinesWithoutAges, printed at printedAt
	// (zero before the first block).
	shown     string
	printedAt time.Time
	// held is a changed model not printed yet, built at heldAt (nil when none).
	held   *viewmodel.Model
	heldAt time.Time
	// printed holds the eventKey of every event a block printed.
	printed map[string]bool
}

// show prints m, built at now, as a block when it shows something the last
// block did not and that block is plainInterval old, or at once when the
// rollout ended; a change that must wait is held for flush. When the
// rollout ended well it then prints Ended's line. It returns m.Outcome().
func (p *plainView) show(m *viewmodel.Model, now time.Time) (done bool, err error) {
	done, err = m.Outcome()
	p.held = nil
	if key := m.LinesWithoutAges(); key != p.shown {
		if done || p.printedAt.IsZero() || now.Sub(p.printedAt) >= plainInterval {
			p.print(m, now)
			p.shown, p.printedAt = key, now
		} else {
			p.held, p.heldAt = m, now
		}
	}
	if done && err == nil {
		fmt.Fprintln(p.out, m.Ended())
	}
	return done, err
}

// print writes m's block stamped with at: Lines(true) with only the events
// no block printed before, which it records as printed.
func (p *plainView) print(m *viewmodel.Model, at time.Time) {
	if p.printed == nil {
		p.printed = map[string]bool{}
	}
	unseen := *m
	unseen.Events = nil
	for _, e := range m.Events {
		if key := eventKey(e); !p.printed[key] {
			p.printed[key] = true
			unseen.Events = append(unseen.Events, e)
		}
	}
	fmt.Fprintf(p.out, "%s %s\n", at.Format("15:04:05"), unseen.Lines(true))
}

// eventKey identifies an event line: the event's UID (else its namespace
// and name) and its line (viewmodel.EventLine). An event that happens again
// with the same message (the API server counts it up) prints the same line,
// which is not printed again; one whose message changes (the event
// aggregator's "(combined from similar events): …", which names the latest
// of them) prints a new line.
func eventKey(e v1.Event) string {
	id := string(e.UID)
	if id == "" {
		id = e.Namespace + "/" + e.Name
	}
	return id + "\x00" + viewmodel.EventLine(e)
}

// flush prints the block show held back, if any: the watch is ending.
func (p *plainView) flush() {
	if p.held != nil {
		p.print(p.held, p.heldAt)
		p.held = nil
	}
}
