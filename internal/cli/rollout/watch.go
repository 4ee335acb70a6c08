package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// watchInterval is how often `rollout watch` reads the Deployment, its
// ReplicaSets, pods and events.
const watchInterval = 500 * time.Millisecond

// maxPodNames is how many pod names a why-stuck line lists before "…".
const maxPodNames = 10

// watchOptions are `rollout watch`'s flags.
type watchOptions struct {
	timeout time.Duration
	events  int
}

func newWatchCommand(c *clusterFlags) *cobra.Command {
	o := &watchOptions{}
	cmd := &cobra.Command{
		Use:   "watch deploy/NAME [--timeout D]",
		Short: "Follow a Deployment's rollout until it completes or fails, and say why it is stuck",
		Long: `Follows the rollout of a Deployment: its ReplicaSets (desired, ready, available), its
conditions, the latest events, and why it is stuck: the new ReplicaSet's pods that are not
available, grouped by reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable, not Ready
after N s, ...) with their names and the first one's message. It prints a new block whenever
something changes.

It exits 0 when the rollout is complete and 1 when the Deployment reports
ProgressDeadlineExceeded or --timeout passes, like "kubectl rollout status".`,
		Example: `  kubedeploy rollout watch deploy/nginx-deployment
  kubedeploy rollout watch deploy/nginx-deployment --timeout 5m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentName(args[0])
			if err != nil {
				return err
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
			return watchRollout(ctx, client, ns, name, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "give up (exit 1) after this long; 0 waits for completion or the progress deadline")
	cmd.Flags().IntVar(&o.events, "events", 3, "how many of the latest events to show")
	return cmd
}

// errDeadline is returned when the Deployment reports ProgressDeadlineExceeded.
var errDeadline = errors.New("exceeded its progress deadline")

// watchRollout polls every watchInterval and prints a block whenever the
// view changes, until the rollout completes (nil), the Deployment exceeds
// its progress deadline (an error wrapping errDeadline) or ctx ends (an
// error saying it timed out).
func watchRollout(ctx context.Context, client kubernetes.Interface, ns, name string, o *watchOptions, out io.Writer) error {
	last := ""
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		v, err := readView(ctx, client, ns, name, o.events)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("deployment %s/%s: timed out waiting for the rollout", ns, name)
			}
			return err
		}
		// A new block when anything but the why-messages changed (those
		// carry ages, "not Ready after 12s", that change every second).
		if key := v.render(false); key != last {
			fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05"), v.render(true))
			last = key
		}
		switch v.state {
		case stateComplete:
			fmt.Fprintf(out, "deployment %q successfully rolled out\n", name)
			return nil
		case stateDeadline:
			return fmt.Errorf("deployment %s/%s %w", ns, name, errDeadline)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s/%s: timed out waiting for the rollout", ns, name)
		case <-tick.C:
		}
	}
}

// rolloutState is where a rollout stands, as kubectl rollout status judges it.
type rolloutState int

const (
	stateProgressing rolloutState = iota
	stateComplete
	stateDeadline
)

// view is what one read of the cluster shows.
type view struct {
	d      *appsv1.Deployment
	newRS  *appsv1.ReplicaSet
	oldRSs []*appsv1.ReplicaSet
	stuck  []unavailable.Group
	events []string
	state  rolloutState
}

// readView reads the Deployment, its ReplicaSets, the new ReplicaSet's pods
// and the Deployment's latest events.
func readView(ctx context.Context, client kubernetes.Interface, ns, name string, events int) (*view, error) {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	v := &view{d: d, state: state(d)}
	list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var owned []*appsv1.ReplicaSet
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == d.UID {
			owned = append(owned, &list.Items[i])
		}
	}
	v.newRS = deployment.FindNewReplicaSet(d, owned)
	for _, rs := range owned {
		if rs != v.newRS && rs.Spec.Replicas != nil && (*rs.Spec.Replicas > 0 || rs.Status.Replicas > 0) {
			v.oldRSs = append(v.oldRSs, rs)
		}
	}
	slices.SortFunc(v.oldRSs, func(a, b *appsv1.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	if v.newRS != nil && v.state != stateComplete {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: metav1.FormatLabelSelector(v.newRS.Spec.Selector),
		})
		if err != nil {
			return nil, err
		}
		var owned []*v1.Pod
		for i := range pods.Items {
			if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && ref.UID == v.newRS.UID {
				owned = append(owned, &pods.Items[i])
			}
		}
		v.stuck = unavailable.Groups(owned, d.Spec.MinReadySeconds, time.Now())
	}
	if events > 0 {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Deployment", "involvedObject.name": name,
		}.AsSelector().String()})
		if err != nil {
			return nil, err
		}
		items := evs.Items
		slices.SortStableFunc(items, func(a, b v1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		for _, e := range items[max(0, len(items)-events):] {
			v.events = append(v.events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
		}
	}
	return v, nil
}

func eventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// state judges d's rollout as kubectl rollout status does: complete when the
// controller observed the current generation and every replica is updated
// and available with no old one left; failed on ProgressDeadlineExceeded.
func state(d *appsv1.Deployment) rolloutState {
	if d.Status.ObservedGeneration < d.Generation {
		return stateProgressing
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return stateDeadline
		}
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	s := d.Status
	if s.UpdatedReplicas == replicas && s.Replicas == replicas && s.AvailableReplicas == replicas {
		return stateComplete
	}
	return stateProgressing
}

// render is the view as plain lines (the time is added by the caller), the
// why-lines with the first pod's message when messages is set.
func (v *view) render(messages bool) string {
	d, s := v.d, v.d.Status
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	var b strings.Builder
	fmt.Fprintf(&b, "deployment/%s: %d/%d updated, %d available, %d total", d.Name, s.UpdatedReplicas, replicas, s.AvailableReplicas, s.Replicas)
	if d.Spec.Paused {
		b.WriteString(" (paused)")
	}
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Reason)
	}
	rsLine := func(kind string, rs *appsv1.ReplicaSet) {
		desired := int32(0)
		if rs.Spec.Replicas != nil {
			desired = *rs.Spec.Replicas
		}
		fmt.Fprintf(&b, "\n  %s %s: %d desired, %d ready, %d available", kind, rs.Name, desired, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas)
	}
	if v.newRS != nil {
		rsLine("new", v.newRS)
	}
	for _, rs := range v.oldRSs {
		rsLine("old", rs)
	}
	for _, g := range v.stuck {
		names := g.Pods
		more := ""
		if len(names) > maxPodNames {
			names, more = names[:maxPodNames], fmt.Sprintf(" and %d more", len(g.Pods)-maxPodNames)
		}
		fmt.Fprintf(&b, "\n  why: %d %s: %s%s", len(g.Pods), g.Reason, strings.Join(names, ", "), more)
		if messages && g.Message != "" {
			fmt.Fprintf(&b, " (%s)", g.Message)
		}
	}
	for _, e := range v.events {
		fmt.Fprintf(&b, "\n  event: %s", e)
	}
	return b.String()
}
