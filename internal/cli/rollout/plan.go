package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// planOptions are `rollout plan`'s flags.
type planOptions struct {
	images         []string
	files          []string
	local          bool
	podStartup     float64
	podTermination float64
	output         string
}

func newPlanCommand(c *clusterFlags) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan [deploy/NAME] [--image CONTAINER=IMAGE] [-f NEW.yaml] [--local]",
		Short: "Show, step by step, the rollout a change to a Deployment would start",
		Long: `Computes the rollout a change would start by running kubedeploy's Deployment and
ReplicaSet controllers' own code on a simulated copy of the Deployment, its ReplicaSets
and their pods: new pods become Ready --pod-startup seconds after they are created and
available minReadySeconds later; existing pods keep their nodes, ages, readiness and
deletion costs, so each step in -o json names the pods the ReplicaSet controller
deletes (deletedPods). It never writes to the cluster.

The change is --image CONTAINER=IMAGE (as kubectl set image; * for every container)
and/or -f with the Deployment's new manifest, which the API server defaults and
validates in a dry run. Without a change it plans the rest of the current rollout.

With --local no cluster is read: -f gives the current Deployment (and, if present,
its ReplicaSets with their status, as "kubectl get deploy,rs -o yaml" prints them);
a second -f with the same Deployment is the new version. Without ReplicaSets the
Deployment is taken as fully rolled out.

Each step is one write of ReplicaSet sizes by the controller; TOTAL is the sum of
the sizes (pods allowed, not counting terminating ones) and AVAILABLE the available
pods right after the step's scale-down. The simulation makes the pods of one step
available at the same instant. In a cluster they turn Ready some milliseconds apart,
and kubedeploy's ReplicaSet controller reports those that turn Ready within 250 ms of
the first together, so on a quiet "kubedeploy up" the controllers take exactly the
planned steps. Where the pods of one step turn Ready further apart (a busy scheduler
or node, slow image pulls), the controller splits a step into smaller ones within
the same bounds.
With --local, the manifests get the defaults kube-apiserver gives them
(its own defaulting code, of the Kubernetes version kubedeploy embeds), so
the pod-template-hash in ReplicaSet names is the one a cluster of that
version gives them.`,
		Example: `  kubedeploy rollout plan deploy/nginx-deployment --image nginx-deployment=nginx:1.9.3
  kubedeploy rollout plan -f examples/nginx-deployment.yaml -o json
  kubedeploy rollout plan --local -f examples/nginx-deployment.yaml --image nginx-deployment=nginx:1.9.3`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), c, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.images, "image", nil, "CONTAINER=IMAGE to set (repeatable; * for every container)")
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest with the Deployment's new version (repeatable; with --local, the current version first)")
	f.BoolVar(&o.local, "local", false, "read nothing from the cluster: plan from -f manifests alone")
	f.Float64Var(&o.podStartup, "pod-startup", 1, "seconds from a pod's creation to it being Ready")
	f.Float64Var(&o.podTermination, "pod-termination", 0, "seconds a deleted pod stays Terminating (Recreate waits for it)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// run builds the current state and the change, simulates and prints.
func (o *planOptions) run(ctx context.Context, c *clusterFlags, args []string, out, errOut io.Writer) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: use table or json", o.output)
	}
	if o.podStartup <= 0 || o.podTermination < 0 {
		return errors.New("--pod-startup must be > 0 and --pod-termination >= 0 seconds")
	}
	name := ""
	if len(args) == 1 {
		n, err := deploymentName(args[0])
		if err != nil {
			return err
		}
		name = n
	}
	manifests, err := readManifests(o.files)
	if err != nil {
		return err
	}
	var from simulator.State
	if o.local {
		from, err = localState(ctx, manifests, name, c.namespace())
	} else {
		from, err = clusterState(ctx, c, manifests, name, errOut)
	}
	if err != nil {
		return err
	}
	// The verdict on the cluster's objects as they are, before the change (rolloutstate.VerdictOf, as the
	// controller's conditions and `rollout watch` say it); with -f the Deployment read is already changed.
	var current rolloutstate.Verdict
	if !o.local && len(o.files) == 0 {
		current = rolloutstate.VerdictOf(from.Deployment, from.ReplicaSets)
	}
	next := from.Deployment
	if err := setImages(next, o.images); err != nil {
		return err
	}
	plan, err := simulator.Simulate(ctx, from, simulator.Config{
		PodStartup:     seconds(o.podStartup),
		PodTermination: seconds(o.podTermination),
	})
	if err != nil {
		return err
	}
	for _, e := range rolloutstate.PolicyErrors(next) {
		fmt.Fprintf(errOut, "Warning: %v; %s.\n", e, e.Effect)
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(plan)
	} else {
		err = printPlan(out, next, plan, current)
	}
	if err == nil && plan.Verdict == rolloutstate.PhaseInvalid {
		return fmt.Errorf("deployment/%s %w", plan.Deployment, ErrInvalidPolicy)
	}
	return err
}

// ErrInvalidPolicy is wrapped by the error of `rollout plan` and `rollout
// watch` when a kubedeploy.io/ policy value that does not parse holds the
// rollout (rolloutstate.PhaseInvalid); what is wrong was printed before it.
var ErrInvalidPolicy = viewmodel.ErrInvalidPolicy

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// printPlan writes the plan as a table: a header, the rollout's verdict now
// when there is one and it is not complete ("Now: held by …"), one row per
// step and a summary line.
func printPlan(out io.Writer, next *appsv1.Deployment, p *simulator.Plan, now rolloutstate.Verdict) error {
	printHeader(out, next, p, now)
	if p.Paused {
		fmt.Fprintf(out, "It is paused: nothing happens until `kubectl rollout resume deployment/%s`; then:\n", p.Deployment)
	}
	if len(p.Steps) == 0 {
		printNoStep(out, p, now)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := []string{"STEP", "TIME", "NEW " + orDash(p.NewReplicaSet)}
	for _, name := range p.OldReplicaSets {
		header = append(header, "OLD "+name)
	}
	header = append(header, "TOTAL", "AVAILABLE")
	var doms []string
	if p.SpreadKey != "" && len(p.Steps[0].Spread) > 0 {
		doms = slices.Sorted(maps.Keys(p.Steps[0].Spread))
		header = append(header, "SPREAD "+strings.Join(doms, "/"))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, s := range p.Steps {
		newSize := "-"
		if s.NewReplicaSetExists {
			newSize = fmt.Sprint(s.NewReplicas)
		}
		row := []string{fmt.Sprint(i + 1), fmt.Sprintf("%gs", s.Seconds), newSize}
		for _, n := range s.OldReplicas {
			row = append(row, fmt.Sprint(n))
		}
		row = append(row, fmt.Sprint(s.MaxTotal), fmt.Sprint(s.MinAvailable))
		if doms != nil {
			row = append(row, spreadCell(doms, s.Spread))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	end := fmt.Sprintf("complete after about %gs", p.EstimatedSeconds)
	switch {
	case p.Partitioned:
		end = fmt.Sprintf("%s after about %gs", p.Stopped, p.EstimatedSeconds)
	case !p.Complete:
		end = "not complete: " + p.Stopped
	}
	fmt.Fprintf(out, "%d steps; at most %d pods, at least %d available; %s.\n", len(p.Steps), p.PeakPods, p.MinAvailable, end)
	if doms != nil {
		fmt.Fprintf(out, "SPREAD: live pods per %s after each step (kubedeploy.io/scale-down-spread); new pods go where the pods their spread constraint counts are fewest.\n", p.SpreadKey)
	}
	return nil
}

// printNoStep says why a plan has no step: complete, held where the Now line says (the simulated end may
// assume differently of pods that are not ready, so it is not repeated), or why the simulation stopped.
func printNoStep(out io.Writer, p *simulator.Plan, now rolloutstate.Verdict) {
	switch {
	case p.Complete:
		fmt.Fprintln(out, "No rollout: the Deployment is complete and the change does not alter its pod template or size.")
	case now.Phase != "" && now.Phase == p.Verdict:
		fmt.Fprintln(out, "No step: the controllers take none from here.")
	default:
		fmt.Fprintf(out, "No step: %s\n", p.Stopped)
	}
}

// printHeader prints the plan's first line (the Deployment, its replicas and strategy) and "Now: <verdict>"
// for a verdict that is known and not complete (rolloutstate.VerdictOf).
func printHeader(out io.Writer, next *appsv1.Deployment, p *simulator.Plan, now rolloutstate.Verdict) {
	strategy := string(p.Strategy)
	if ru := next.Spec.Strategy.RollingUpdate; p.Strategy == appsv1.RollingUpdateDeploymentStrategyType && ru != nil {
		strategy += fmt.Sprintf(" (maxSurge %s, maxUnavailable %s)", ru.MaxSurge.String(), ru.MaxUnavailable.String())
	}
	fmt.Fprintf(out, "deployment/%s: %d replicas, %s\n", p.Deployment, p.Replicas, strategy)
	if now.Phase != "" && now.Phase != rolloutstate.PhaseComplete {
		fmt.Fprintf(out, "Now: %s\n", now.Summary)
	}
}

// spreadCell is one step's pods per domain in doms' order, "3/3/2"; a domain the step does not list is 0.
func spreadCell(doms []string, spread map[string]int) string {
	parts := make([]string, len(doms))
	for i, d := range doms {
		parts[i] = fmt.Sprint(spread[d])
	}
	return strings.Join(parts, "/")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
