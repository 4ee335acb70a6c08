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
	apiequality "k8s.io/apimachinery/pkg/api/equality"

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

// planLong is `rollout plan --help`'s description.
const planLong = `Computes the rollout a change would start by running kubedeploy's Deployment and
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

A pod that fails never becomes available: a container waiting with a reason that
does not resolve by itself (ImagePullBackOff, ErrImagePull, CrashLoopBackOff,
CreateContainerConfigError, ...) or a pod Running and not Ready for longer than
--pod-startup plus its probes' delays. A ReplicaSet whose pods fail that way, none
Ready, has a failing template: the pods the plan creates for it fail too; a changed
template's pods start. A rollout stuck on failing pods ends the plan with what will
not complete without a change: the pods and why, when the progress deadline passes,
and what kubedeploy.io/rollback-on-progress-deadline then does.

With --local, the manifests get the defaults kube-apiserver gives them
(its own defaulting code, of the Kubernetes version kubedeploy embeds), so
the pod-template-hash in ReplicaSet names is the one a cluster of that
version gives them.`

func newPlanCommand(c *clusterFlags) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan [deploy/NAME] [--image CONTAINER=IMAGE] [-f NEW.yaml] [--local]",
		Short: "Show, step by step, the rollout a change to a Deployment would start",
		Long:  planLong,
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
	f.Float64Var(&o.podStartup, "pod-startup", 1, "seconds from a pod's creation to it being Ready; a pod Running and not Ready for longer (plus its probes' delays) is taken as never Ready")
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
	r, err := o.report(ctx, from, current)
	if err != nil {
		return err
	}
	return o.write(out, errOut, r)
}

// report applies --image to from.Deployment, simulates the rollout and returns it for printing with now,
// the verdict before the change.
func (o *planOptions) report(ctx context.Context, from simulator.State, now rolloutstate.Verdict) (planReport, error) {
	next := from.Deployment
	before := next.Spec.Template.DeepCopy()
	if err := setImages(next, o.images); err != nil {
		return planReport{}, err
	}
	plan, err := simulator.Simulate(ctx, from, simulator.Config{
		PodStartup:     seconds(o.podStartup),
		PodTermination: seconds(o.podTermination),
	})
	if err != nil {
		return planReport{}, err
	}
	return planReport{next: next, plan: plan, now: now, changed: !apiequality.Semantic.DeepEqual(before, &next.Spec.Template)}, nil
}

// write prints r as --output says (the table, or the Plan as JSON), after a warning on errOut for each
// invalid kubedeploy.io/ value; it returns ErrInvalidPolicy, wrapped, when an invalid value holds the rollout.
func (o *planOptions) write(out, errOut io.Writer, r planReport) error {
	for _, e := range rolloutstate.PolicyErrors(r.next) {
		fmt.Fprintf(errOut, "Warning: %v; %s.\n", e, e.Effect)
	}
	var err error
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(r.plan)
	} else {
		err = printPlan(out, r)
	}
	if err == nil && r.plan.Verdict == rolloutstate.PhaseInvalid {
		return fmt.Errorf("deployment/%s %w", r.plan.Deployment, ErrInvalidPolicy)
	}
	return err
}

// ErrInvalidPolicy is wrapped by the error of `rollout plan` and `rollout
// watch` when a kubedeploy.io/ policy value that does not parse holds the
// rollout (rolloutstate.PhaseInvalid); what is wrong was printed before it.
var ErrInvalidPolicy = viewmodel.ErrInvalidPolicy

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// planReport is what printPlan prints.
type planReport struct {
	// next is the Deployment as changed; plan what Simulate made of it.
	next *appsv1.Deployment
	plan *simulator.Plan
	// now is the rollout's verdict on the cluster's objects before the change (rolloutstate.VerdictOf, as the
	// controller's conditions and `rollout watch` say it); zero with -f or --local.
	now rolloutstate.Verdict
	// changed reports that the change (--image) alters the pod template: the plan's end is then the new
	// template's, and its counts are not now's.
	changed bool
}

// printPlan writes the plan as a table: a header, the rollout's verdict now when there is one and it is not
// complete ("Now: held by …"), one row per step, a summary line and, for a stuck rollout, its failing pods,
// progress deadline and EX-2's rollback (printStuck).
func printPlan(out io.Writer, r planReport) error {
	p := r.plan
	printHeader(out, r)
	printRolloutSteps(out, p)
	if len(p.RolloutSteps) > 0 {
		printBackgroundAnalysis(out, r.next)
	}
	if p.Paused {
		fmt.Fprintf(out, "It is paused: nothing happens until `kubectl rollout resume deployment/%s`; then:\n", p.Deployment)
	}
	if len(p.Steps) == 0 {
		printNoStep(out, p, r.now)
		printStuck(out, p.Stuck)
		return nil
	}
	doms, err := printSteps(out, p)
	if err != nil {
		return err
	}
	end := fmt.Sprintf("complete after about %gs", p.EstimatedSeconds)
	switch {
	case p.Partitioned:
		end = fmt.Sprintf("%s after about %gs", p.Stopped, p.EstimatedSeconds)
	case p.Stuck != nil:
		end = p.Stopped
	case !p.Complete:
		end = "not complete: " + p.Stopped
	}
	fmt.Fprintf(out, "%s; at most %s, at least %d available; %s.\n", count(len(p.Steps), "step", "steps"), count(int(p.PeakPods), "pod", "pods"), p.MinAvailable, end)
	if doms != nil {
		fmt.Fprintf(out, "SPREAD: live pods per %s after each step (kubedeploy.io/scale-down-spread); new pods go where the pods their spread constraint counts are fewest.\n", p.SpreadKey)
	}
	printStuck(out, p.Stuck)
	return nil
}

// printSteps writes the steps' table and returns the spread's domains in the order of its SPREAD column (nil
// without one).
func printSteps(out io.Writer, p *simulator.Plan) ([]string, error) {
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
	return doms, tw.Flush()
}

// count is "1 step" or "N steps": n with the word that goes with it.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// printNoStep says why a plan has no step: complete, stuck on failing pods (printStuck follows), held where
// the Now line says (the simulated end may assume differently of pods that are not ready, so it is not
// repeated), or why the simulation stopped.
func printNoStep(out io.Writer, p *simulator.Plan, now rolloutstate.Verdict) {
	switch {
	case p.Complete:
		fmt.Fprintln(out, "No rollout: the Deployment is complete and the change does not alter its pod template or size.")
	case p.Stuck != nil:
		fmt.Fprintf(out, "No step: the rollout %s.\n", p.Stopped)
	case now.Phase != "" && now.Phase == p.Verdict:
		fmt.Fprintln(out, "No step: the controllers take none from here.")
	default:
		fmt.Fprintf(out, "No step: %s\n", p.Stopped)
	}
}

// printHeader prints the plan's first line (the Deployment, its replicas and strategy) and "Now: <verdict>"
// for a verdict that is known and not complete (rolloutstate.VerdictOf); "Now, before the change:" when the
// change alters the pod template, since the plan's end (its summary) is then the new template's.
func printHeader(out io.Writer, r planReport) {
	p := r.plan
	strategy := string(p.Strategy)
	if ru := r.next.Spec.Strategy.RollingUpdate; p.Strategy == appsv1.RollingUpdateDeploymentStrategyType && ru != nil {
		strategy += fmt.Sprintf(" (maxSurge %s, maxUnavailable %s)", ru.MaxSurge.String(), ru.MaxUnavailable.String())
	}
	fmt.Fprintf(out, "deployment/%s: %s, %s\n", p.Deployment, count(int(p.Replicas), "replica", "replicas"), strategy)
	if r.now.Phase != "" && r.now.Phase != rolloutstate.PhaseComplete {
		label := "Now"
		if r.changed {
			label = "Now, before the change"
		}
		fmt.Fprintf(out, "%s: %s\n", label, r.now.Summary)
	}
}

// printRolloutSteps lists the plan's rollout steps (EX-5), each with the pods it allows on the new template and
// what ends it, then the 100% that follows them.
func printRolloutSteps(out io.Writer, p *simulator.Plan) {
	if len(p.RolloutSteps) == 0 {
		return
	}
	fmt.Fprintf(out, "Rollout steps (%s):\n", rolloutstate.RolloutStepsAnnotation)
	for i, s := range p.RolloutSteps {
		pods := count(int(s.Pods), "pod", "pods")
		switch s.WaitsFor {
		case rolloutstate.StepWaitPods:
			fmt.Fprintf(out, "  %d. %s: %s on the new template, available before the next step\n", i+1, s.Step, pods)
		case rolloutstate.StepWaitTime:
			fmt.Fprintf(out, "  %d. %s: holds at %s\n", i+1, s.Step, pods)
		case rolloutstate.StepWaitAnalysis:
			fmt.Fprintf(out, "  %d. %s: holds at %s until every metric succeeded; a failure aborts the rollout\n", i+1, s.Step, pods)
		default:
			fmt.Fprintf(out, "  %d. %s: holds at %s until `kubedeploy rollout promote deploy/%s`\n", i+1, s.Step, pods, p.Deployment)
		}
	}
	fmt.Fprintf(out, "  then all %d.\n", p.Replicas)
}

// printBackgroundAnalysis says what d's background analysis (EX-6, rolloutstate.RolloutAnalysisAnnotation) does
// beside its rollout steps, or why it holds the rollout when the annotation is invalid; nothing without one.
func printBackgroundAnalysis(out io.Writer, d *appsv1.Deployment) {
	a, err := rolloutstate.BackgroundAnalysisOf(d)
	switch {
	case err != nil:
		fmt.Fprintf(out, "Background analysis: %v; it holds the rollout where it is until fixed.\n", err)
	case a != nil:
		fmt.Fprintf(out, "Background analysis (%s): %s from the first step until the rollout completes, beside the steps; "+
			"a failure aborts the rollout, an inconclusive or errored one holds it until `kubedeploy rollout promote deploy/%s`.\n",
			rolloutstate.RolloutAnalysisAnnotation, a, d.Name)
	}
}

// printStuck says, for a rollout that will not complete without a change (s not nil), which pods fail and
// why, a line per ReplicaSet and reason as `rollout watch` shows them (viewmodel.WhyLine, with the first
// pod's message); when the progress deadline passes; and what kubedeploy.io/rollback-on-progress-deadline
// (EX-2) then does.
func printStuck(out io.Writer, s *simulator.Stuck) {
	if s == nil {
		return
	}
	for _, rs := range s.ReplicaSets {
		which := "old"
		if rs.New {
			which = "new"
		}
		for _, g := range rs.Groups {
			line := fmt.Sprintf("  %s %s: %s", which, rs.Name, viewmodel.WhyLine(g))
			if g.Message != "" {
				line += " (" + g.Message + ")"
			}
			fmt.Fprintln(out, line)
		}
	}
	fmt.Fprintln(out, deadlineLine(s))
	if a := s.AutoRollback; a != nil && a.ReplicaSet != "" {
		fmt.Fprintf(out, "Then the controller rolls it back to revision %d (ReplicaSet %s): %s is \"true\".\n", a.Revision, a.ReplicaSet, rolloutstate.RollbackOnProgressDeadlineAnnotation)
	} else if a != nil {
		fmt.Fprintf(out, "%s is \"true\", but the controller will not roll it back: %s.\n", rolloutstate.RollbackOnProgressDeadlineAnnotation, a.Skipped)
	}
}

// deadlineLine says when s's progress deadline passes (ST-13), or that none runs.
func deadlineLine(s *simulator.Stuck) string {
	switch {
	case s.ProgressDeadlineSeconds == 0:
		return "It has no progress deadline (progressDeadlineSeconds): nothing will report the rollout failed."
	case s.Deadline == nil:
		return fmt.Sprintf("Its progress deadline (%ds) does not run (Progressing: %s): nothing will report the rollout failed.", s.ProgressDeadlineSeconds, orDash(s.ProgressingReason))
	case s.DeadlineExceeded:
		return fmt.Sprintf("It exceeded its progress deadline (%ds) at %s: Progressing is False with reason %s.",
			s.ProgressDeadlineSeconds, s.Deadline.UTC().Format(time.RFC3339), rolloutstate.ProgressDeadlineExceeded)
	}
	in := "now"
	if s.DeadlineSeconds > 0 {
		in = "in about " + seconds(s.DeadlineSeconds).Round(time.Second).String()
	}
	return fmt.Sprintf("Its progress deadline (%ds without progress) passes %s, at %s: Progressing turns False with reason %s.",
		s.ProgressDeadlineSeconds, in, s.Deadline.UTC().Format(time.RFC3339), rolloutstate.ProgressDeadlineExceeded)
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
