package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/timeline"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// refreshInterval is how often `rollout watch` redraws with nothing new from
// its watches, so that ages ("not Ready after 12s") stay current.
const refreshInterval = time.Second

// maxPodNames is how many pod names a why-stuck line lists before "…".
const maxPodNames = 10

// watchOptions are `rollout watch`'s flags.
type watchOptions struct {
	timeout  time.Duration
	events   int
	timeline string
	plain    bool
}

func newWatchCommand(c *clusterFlags) *cobra.Command {
	o := &watchOptions{}
	cmd := &cobra.Command{
		Use:   "watch deploy/NAME [--timeline FILE.png|FILE.svg] [--timeout D]",
		Short: "Follow a Deployment's rollout until it completes or fails, and say why it is stuck",
		Long: `Follows the rollout of a Deployment: its ReplicaSets (desired, ready, available), its
conditions, the latest events, and why it is stuck: the new ReplicaSet's pods that are not
available, grouped by reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable, not Ready
after N s, ...) with their names and the first one's message.

On a terminal it is a live view with one progress bar per ReplicaSet (q or Ctrl-C stops
watching). Piped, or with --plain, it prints a block of plain lines whenever something
changes.

With --timeline it also records the rollout from the moment it starts watching and, when it
ends, writes a picture of it (PNG or SVG, by the file's extension): every ReplicaSet's size
and the Deployment's available replicas over time, the surge and availability bounds, and
the events.

It exits 0 when the rollout is complete and 1 when the Deployment reports
ProgressDeadlineExceeded or --timeout passes, like "kubectl rollout status".`,
		Example: `  kubedeploy rollout watch deploy/nginx-deployment
  kubedeploy kubectl set image deploy/nginx-deployment nginx=nginx:1.9.3 && \
    kubedeploy rollout watch deploy/nginx-deployment --timeline rollout.png
  kubedeploy rollout watch deploy/nginx-deployment --timeout 5m --plain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentName(args[0])
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
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "give up (exit 1) after this long; 0 waits for completion or the progress deadline")
	cmd.Flags().IntVar(&o.events, "events", 3, "how many of the latest events to show")
	cmd.Flags().StringVar(&o.timeline, "timeline", "", "when the watch ends, write a picture of the rollout to this .png or .svg file")
	cmd.Flags().BoolVar(&o.plain, "plain", false, "print plain lines even on a terminal")
	return cmd
}

// errDeadline is returned when the Deployment reports ProgressDeadlineExceeded.
var errDeadline = errors.New("exceeded its progress deadline")

// errStopped is returned when the user stops the terminal view (q, Ctrl-C).
var errStopped = errors.New("stopped watching before the rollout ended")

// watchRollout follows the Deployment ns/name with watches (see follower)
// until the rollout completes (nil), the Deployment exceeds its progress
// deadline (an error wrapping errDeadline) or ctx ends (an error saying it
// timed out). When out is a terminal (and o.plain is unset) it runs the live
// view, else it prints a plain block whenever the view changes. With
// o.timeline it writes the recorded picture at the end, whatever the
// outcome, and says so on errOut.
func watchRollout(ctx context.Context, client kubernetes.Interface, ns, name string, o *watchOptions, out, errOut io.Writer) error {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return timedOut(ns, name)
		}
		return err
	}
	// The informers stop with this context; the factories' Shutdown waits for them.
	fctx, cancel := context.WithCancel(ctx)
	f, err := follow(fctx, client, d, o.events, o.timeline != "")
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return timedOut(ns, name)
		}
		return err
	}
	defer func() {
		cancel()
		f.shutdown()
	}()
	if terminal(out) && !o.plain {
		err = runTerminal(ctx, f, o, out)
	} else {
		err = runPlain(ctx, f, o, out)
	}
	if o.timeline != "" {
		rec := f.recording()
		if werr := timeline.Write(o.timeline, rec); werr != nil {
			return errors.Join(err, fmt.Errorf("timeline: %w", werr))
		}
		fmt.Fprintf(errOut, "wrote the rollout's timeline (%d changes, %d events) to %s\n", len(rec.Samples), len(rec.Events), o.timeline)
	}
	return err
}

// terminal reports whether out is a terminal.
func terminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func timedOut(ns, name string) error {
	return fmt.Errorf("deployment %s/%s: timed out waiting for the rollout", ns, name)
}

// outcome turns the final view into watch's result: nil when complete or
// held at its partition, the deadline error, or nil with ok=false while
// still progressing.
func outcome(v *view) (done bool, err error) {
	switch v.state {
	case rolloutstate.PhaseComplete, rolloutstate.PhaseHeld:
		return true, nil
	case rolloutstate.PhaseFailed:
		return true, fmt.Errorf("deployment %s/%s %w", v.d.Namespace, v.d.Name, errDeadline)
	case rolloutstate.PhaseRolledBack:
		failed, _ := rolloutstate.AutoRolledBackFrom(v.d)
		return true, fmt.Errorf("deployment %s/%s: revision %d %w and was rolled back automatically (%s)",
			v.d.Namespace, v.d.Name, failed, errDeadline, rolloutstate.RollbackOnProgressDeadlineAnnotation)
	}
	return false, nil
}

// runPlain prints a block of plain lines, stamped with the time, whenever the
// view changes (ignoring the ages in why-messages), until the rollout ends.
func runPlain(ctx context.Context, f *follower, o *watchOptions, out io.Writer) error {
	last := ""
	tick := time.NewTicker(refreshInterval)
	defer tick.Stop()
	for {
		v, err := f.view(o.events, time.Now())
		if err != nil {
			return err
		}
		// A new block when anything but the why-messages changed (those
		// carry ages, "not Ready after 12s", that change every second).
		if key := v.render(false); key != last {
			fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05"), v.render(true))
			last = key
		}
		if done, err := outcome(v); done {
			if err == nil {
				fmt.Fprintln(out, v.ended())
			}
			return err
		}
		select {
		case <-ctx.Done():
			return timedOut(v.d.Namespace, v.d.Name)
		case <-f.changed:
		case <-tick.C:
		}
	}
}

// ended is the last line of a watch that ended well: complete, or held at
// its partition (EX-1) with the Progressing message.
func (v *view) ended() string {
	if v.state == rolloutstate.PhaseHeld {
		for _, c := range v.d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				return fmt.Sprintf("deployment %q rollout held: %s", v.d.Name, c.Message)
			}
		}
	}
	return fmt.Sprintf("deployment %q successfully rolled out", v.d.Name)
}

// view is what one look at the watched objects shows.
type view struct {
	d        *appsv1.Deployment
	replicas int32
	newRS    *appsv1.ReplicaSet
	oldRSs   []*appsv1.ReplicaSet
	stuck    []unavailable.Group
	events   []v1.Event
	state    rolloutstate.Phase
}

// buildView makes the view of d from its ReplicaSets (any order; those d
// does not control are skipped), the pods of its selector and its events
// (the latest nEvents are kept), judged at now.
func buildView(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*v1.Pod, events []*v1.Event, nEvents int, now time.Time) *view {
	owned := rolloutstate.ControlledBy(rss, d.UID)
	v := &view{d: d, state: rolloutstate.PhaseOf(d, owned), replicas: rolloutstate.Replicas(d)}
	v.newRS = rolloutstate.NewReplicaSet(d, owned)
	for _, rs := range owned {
		if rs != v.newRS && (rolloutstate.ReplicaSetReplicas(rs) > 0 || rs.Status.Replicas > 0) {
			v.oldRSs = append(v.oldRSs, rs)
		}
	}
	slices.SortFunc(v.oldRSs, func(a, b *appsv1.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	if v.newRS != nil && v.state != rolloutstate.PhaseComplete && v.state != rolloutstate.PhaseRolledBack {
		v.stuck = unavailable.Groups(rolloutstate.ControlledBy(pods, v.newRS.UID), d.Spec.MinReadySeconds, now)
	}
	if nEvents > 0 {
		evs := make([]v1.Event, 0, len(events))
		for _, e := range events {
			if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == d.Name && (e.InvolvedObject.UID == "" || e.InvolvedObject.UID == d.UID) {
				evs = append(evs, *e)
			}
		}
		slices.SortFunc(evs, compareEvents)
		v.events = evs[max(0, len(evs)-nEvents):]
	}
	return v
}

// compareEvents orders events by time, then by name: the times have whole
// seconds, and client-go names an event NAME.<hex of its UnixNano>, so the
// name orders events of the same second.
func compareEvents(a, b v1.Event) int {
	return cmp.Or(eventTime(a).Compare(eventTime(b)), cmp.Compare(len(a.Name), len(b.Name)), strings.Compare(a.Name, b.Name))
}

func eventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// summary is the view's first line: the Deployment's counts.
func (v *view) summary() string {
	s := v.d.Status
	line := fmt.Sprintf("deployment/%s: %d/%d updated, %d available, %d total", v.d.Name, s.UpdatedReplicas, v.replicas, s.AvailableReplicas, s.Replicas)
	if v.d.Spec.Paused {
		line += " (paused)"
	}
	return line
}

// whyLine is one why-stuck group: count, reason and up to maxPodNames pods.
func whyLine(g unavailable.Group) string {
	names, more := g.Pods, ""
	if len(names) > maxPodNames {
		names, more = names[:maxPodNames], fmt.Sprintf(" and %d more", len(g.Pods)-maxPodNames)
	}
	return fmt.Sprintf("%d %s: %s%s", len(g.Pods), g.Reason, strings.Join(names, ", "), more)
}

func eventLine(e v1.Event) string {
	return fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
}

// render is the view as plain lines (the time is added by the caller), the
// why-lines with the first pod's message when messages is set.
func (v *view) render(messages bool) string {
	var b strings.Builder
	b.WriteString(v.summary())
	for _, c := range v.d.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Reason)
	}
	rsLine := func(kind string, rs *appsv1.ReplicaSet) {
		fmt.Fprintf(&b, "\n  %s %s: %d desired, %d ready, %d available", kind, rs.Name, rolloutstate.ReplicaSetReplicas(rs), rs.Status.ReadyReplicas, rs.Status.AvailableReplicas)
	}
	if v.newRS != nil {
		rsLine("new", v.newRS)
	}
	for _, rs := range v.oldRSs {
		rsLine("old", rs)
	}
	for _, g := range v.stuck {
		fmt.Fprintf(&b, "\n  why: %s", whyLine(g))
		if messages && g.Message != "" {
			fmt.Fprintf(&b, " (%s)", g.Message)
		}
	}
	for _, e := range v.events {
		fmt.Fprintf(&b, "\n  event: %s", eventLine(e))
	}
	return b.String()
}

// notFound says the watched Deployment is gone.
func notFound(ns, name string) error {
	return apierrors.NewNotFound(appsv1.Resource("deployments"), ns+"/"+name)
}
