package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

const promoteLong = `Ends the pause step a Deployment's rollout is held at (kubedeploy.io/rollout-steps,
spec EX-5), or the analysis it is at or that paused it for a human (an Inconclusive or
Error analysis, EX-6), or with --full skips every step left, so that the rollout goes on
to 100%.

It writes one annotation, kubedeploy.io/rollout-promote, naming the revision and the
step it promotes; the Deployment controller reads it. A promote never reaches a later
step or rollout: the controller ignores one for another revision or step. It writes
through the status subresource (patch on deployments/status), so the Deployment's
generation does not change; with only patch on deployments it writes the Deployment
itself, which bumps the generation.`

const abortLong = `Rolls a Deployment back from the rollout in progress (spec EX-5) exactly as
kubedeploy.io/rollback-on-progress-deadline does (EX-2): to the last revision that
completed, recording the aborted one in kubedeploy.io/failed-revision, with a Warning
event naming both. The rollback itself goes straight to 100%, without steps.

It writes one annotation, kubedeploy.io/rollout-abort, naming the revision to abort;
the Deployment controller carries it out (a revision that completed meanwhile is not
aborted). It writes through the status subresource (patch on deployments/status), or
with only patch on deployments, the Deployment itself.`

func newPromoteCommand(c *clusterFlags) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "promote deploy/NAME [--full]",
		Short: "End the pause or analysis step a rollout with steps is held at (or skip every step left)",
		Long:  promoteLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStepCommand(cmd.Context(), c, args[0], cmd.OutOrStdout(), rolloutstate.RolloutPromoteAnnotation, func(d *appsv1.Deployment, rev int64) (string, string, error) {
				return promote(d, rev, full)
			})
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "skip every step left: the rollout goes to 100% now")
	return cmd
}

func newAbortCommand(c *clusterFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "abort deploy/NAME",
		Short: "Roll back the rollout in progress to the last complete revision",
		Long:  abortLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStepCommand(cmd.Context(), c, args[0], cmd.OutOrStdout(), rolloutstate.RolloutAbortAnnotation, abort)
		},
	}
}

// stepDecision returns, for a Deployment d at revision rev, the value of the annotation to write and what to
// print; or the error that says why nothing is written.
type stepDecision func(d *appsv1.Deployment, rev int64) (value, said string, err error)

// runStepCommand reads deploy/NAME, asks decide what to write, writes it as annotation key (applyStep) and
// prints what it did. The errors are the argument's, the cluster's and applyStep's.
func runStepCommand(ctx context.Context, c *clusterFlags, arg string, out io.Writer, key string, decide stepDecision) error {
	name, err := deploymentName(arg)
	if err != nil {
		return err
	}
	client, ns, err := c.client()
	if err != nil {
		return err
	}
	said, err := applyStep(ctx, client, ns, name, key, decide)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "deployment.apps/%s %s\n", name, said)
	return err
}

// applyStep reads Deployment ns/name, asks decide what to write and writes it as annotation key (a merge
// patch of that one annotation); it returns what decide said it did. The errors are the API's, a Deployment
// whose current generation the controller has not observed or that has no revision, and decide's.
func applyStep(ctx context.Context, client kubernetes.Interface, ns, name, key string, decide stepDecision) (string, error) {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if d.Status.ObservedGeneration < d.Generation {
		return "", fmt.Errorf("deployment/%s: the controller has not yet observed generation %d; try again in a moment", name, d.Generation)
	}
	rev, err := strconv.ParseInt(d.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if err != nil || rev <= 0 {
		return "", fmt.Errorf("deployment/%s has no revision yet (%s): nothing to act on", name, rolloutstate.RevisionAnnotation)
	}
	value, said, err := decide(d, rev)
	if err != nil {
		return "", fmt.Errorf("deployment/%s: %w", name, err)
	}
	if err := patchAnnotation(ctx, client, d, key, value); err != nil {
		return "", err
	}
	return said, nil
}

// patchAnnotation sets d's annotation key to value with a JSON merge patch of its status subresource,
// conditioned on d's uid (a Deployment deleted and created again under the same name is not touched). Through
// status, the annotation does not bump the Deployment's generation (the apps status strategy keeps the spec and
// labels only), so `kubectl rollout status` and GitOps tools see no spec change. Without patch on
// deployments/status (Forbidden) it patches the Deployment itself, which needs patch on deployments and bumps
// the generation; the controller reads the annotation either way.
func patchAnnotation(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         d.UID,
		"annotations": map[string]string{key: value},
	}})
	if err != nil {
		return err
	}
	_, err = client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsForbidden(err) {
		_, err = client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// promote decides `rollout promote`: with full, every step left of revision rev; else the step the rollout is at
// when it is a pause (EX-5) or an analysis (EX-6: its run goes on, or, paused for a human, the rollout goes on),
// or whatever step it is at while an analysis paused it (the background run). It refuses a Deployment without
// valid steps, a revision whose steps have not started or are done (unless an analysis paused it: the background
// one may pause the last stretch), and, without full, any other step.
func promote(d *appsv1.Deployment, rev int64, full bool) (string, string, error) {
	steps, st, err := currentStep(d, rev)
	if err != nil {
		return "", "", err
	}
	if full {
		return rolloutstate.PromoteValue(rev, st.Step, true),
			fmt.Sprintf("promoted: revision %d skips steps %d–%d and rolls out to 100%%", rev, st.Step+1, len(steps)), nil
	}
	value := rolloutstate.PromoteValue(rev, st.Step, false)
	if st.Step >= len(steps) { // every step done, a background analysis paused the last stretch (currentStep)
		return value, fmt.Sprintf("promoted: revision %d goes on past the analysis that paused it (every step done)", rev), nil
	}
	s := steps[st.Step]
	switch {
	case s.Pause != nil || s.Analysis != nil:
		return value, fmt.Sprintf("promoted: step %d of %d (%s) of revision %d ends", st.Step+1, len(steps), s, rev), nil
	case analysisPaused(d):
		return value, fmt.Sprintf("promoted: revision %d goes on past the analysis that paused it (at step %d of %d, %s)", rev, st.Step+1, len(steps), s), nil
	}
	return "", "", fmt.Errorf("step %d of %d (%s) of revision %d is not a pause or an analysis: it goes on once its pods are available (--full skips every step left)",
		st.Step+1, len(steps), s, rev)
}

// analysisPaused reports whether an analysis holds d's rollout for a human (EX-6: Progressing reason
// RolloutAnalysisPaused), whatever step the rollout is at: a background analysis may pause it at any step.
func analysisPaused(d *appsv1.Deployment) bool {
	c := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	return c != nil && c.Reason == rolloutstate.RolloutAnalysisPaused
}

// currentStep returns d's valid steps and the step state of revision rev, or why there is no step to act on.
func currentStep(d *appsv1.Deployment, rev int64) (rolloutstate.Steps, rolloutstate.StepState, error) {
	steps, invalid := rolloutstate.StepsOf(d)
	switch {
	case invalid != nil:
		return nil, rolloutstate.StepState{}, fmt.Errorf("%w; fix it first", invalid)
	case steps == nil:
		return nil, rolloutstate.StepState{}, fmt.Errorf("no %s: nothing to promote", rolloutstate.RolloutStepsAnnotation)
	}
	st, ok := rolloutstate.StepStateOf(d)
	switch {
	case rolloutstate.Complete(d, &d.Status):
		return nil, st, fmt.Errorf("revision %d is complete: nothing to promote", rev)
	case !ok || st.Revision != rev:
		return nil, st, fmt.Errorf("revision %d has not started its steps (a first rollout and a rollback have none): nothing to promote", rev)
	case st.Step >= len(steps) && !analysisPaused(d):
		return nil, st, fmt.Errorf("every step of revision %d is done: nothing to promote", rev)
	}
	return steps, st, nil
}

// abort decides `rollout abort`: revision rev, unless its rollout is complete.
func abort(d *appsv1.Deployment, rev int64) (string, string, error) {
	if rolloutstate.Complete(d, &d.Status) {
		return "", "", fmt.Errorf("revision %d is complete: nothing to abort (kubectl rollout undo goes back to an earlier one)", rev)
	}
	return strconv.FormatInt(rev, 10),
		fmt.Sprintf("abort of revision %d requested: the controller rolls it back to the last complete revision (see its events)", rev), nil
}
