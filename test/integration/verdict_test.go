package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout"
	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// verdictCase is one Deployment put into one verdict, and what every view must say of it.
type verdictCase struct {
	name    string
	reason  string // the Progressing condition's reason
	summary string // rolloutstate's one-line verdict, written out here so no view is checked against itself
	watch   error  // what `rollout watch` ends with: nil (exit 0), viewmodel.ErrDeadline (1), ErrInvalidPolicy (3)
	metric  func(ns, name string) bool
}

// Issue 33, "one verdict per Deployment": five Deployments, put into held, held with the pods kept on the old
// template unavailable, past the progress deadline, rolled back automatically, and stuck on an invalid
// partition; for each, the controller's Progressing condition, `rollout plan` ("Now: …" and its exit), `rollout
// watch` (its verdict line and its exit), observe --once's list of rollouts and the rollout metrics (the
// controllers' own, gathered in this process) say the same thing.
func TestOneVerdictEverywhere(t *testing.T) {
	ns := env.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	cases := setUpVerdicts(ctx, t, ns)
	settled := map[string]*appsv1.Deployment{}
	for _, c := range cases {
		settled[c.name] = waitDeployment(t, ns, c.name, "Progressing "+c.reason, func(d *appsv1.Deployment) bool {
			return observed(d) && hasReason(d, appsv1.DeploymentProgressing, c.reason)
		})
	}
	once, err := manager.ObserveOnce(ctx, manager.Config{RESTConfig: env.Config, QPS: 20, Burst: 30, Version: "test"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := settled[c.name]
			if c.reason == rolloutstate.RolloutPartitioned || c.reason == rolloutstate.InvalidRolloutPartition {
				if msg := condition(d, appsv1.DeploymentProgressing).Message; !strings.Contains(msg, heldPart(c.summary)) {
					t.Errorf("condition message %q does not say %q", msg, heldPart(c.summary))
				}
			}
			out, err := runRollout(ctx, ns, "plan", "deploy/"+c.name)
			if !strings.Contains(out, "Now: "+c.summary+"\n") {
				t.Errorf("rollout plan does not say %q:\n%s", "Now: "+c.summary, out)
			}
			if (c.watch == viewmodel.ErrInvalidPolicy) != errors.Is(err, viewmodel.ErrInvalidPolicy) {
				t.Errorf("rollout plan error %v", err)
			}
			out, err = runRollout(ctx, ns, "watch", "deploy/"+c.name, "--plain", "--timeout", "30s")
			if !strings.Contains(out, "  rollout "+c.summary+"\n") {
				t.Errorf("rollout watch does not say %q:\n%s", "rollout "+c.summary, out)
			}
			if (c.watch == nil) != (err == nil) || (c.watch != nil && !errors.Is(err, c.watch)) {
				t.Errorf("rollout watch ended with %v, want %v", err, c.watch)
			}
			if want := ns + "/" + c.name + ": " + c.summary; !contains(strings.Join(once.Rollouts, "\n"), want) {
				t.Errorf("observe --once rollouts %q, want %q", once.Rollouts, want)
			}
			harness.Eventually(t, 30*time.Second, "the rollout metrics to say "+c.name+"'s verdict", func(context.Context) (bool, error) {
				return c.metric(ns, c.name), nil
			})
		})
	}
}

// heldPart is what a Progressing message shares with the verdict summary: the text after "held by …: " or
// "stuck on an invalid value: ".
func heldPart(summary string) string {
	if _, after, ok := strings.Cut(summary, "stuck on an invalid value: "); ok {
		return after
	}
	_, after, _ := strings.Cut(summary, ": ")
	return strings.SplitN(after, "; ", 2)[0]
}

// setUpVerdicts creates the five Deployments of TestOneVerdictEverywhere (4 replicas, maxSurge 1,
// maxUnavailable 1) and drives each to its verdict, in parallel.
func setUpVerdicts(ctx context.Context, t *testing.T, ns string) []verdictCase {
	waiting := func(on string) func(ns, name string) bool {
		return func(ns, name string) bool {
			return metricHas(t, "kubedeploy_deployment_rollout_waiting_seconds", ns, name, "waiting_on", on)
		}
	}
	ended := func(outcome string) func(ns, name string) bool {
		return func(ns, name string) bool {
			return metricHas(t, "kubedeploy_deployment_rollouts_total", ns, name, "outcome", outcome)
		}
	}
	cases := []verdictCase{
		{"held", rolloutstate.RolloutPartitioned, "held by kubedeploy.io/rollout-partition: 2 of 4 pods updated", nil, waiting("partition")},
		{"kept-back", rolloutstate.RolloutPartitioned,
			"held by kubedeploy.io/rollout-partition: 2 of 4 pods updated; 2 pods kept on the old template are unavailable", nil, waiting("partition")},
		{"failed", rolloutstate.ProgressDeadlineExceeded, "exceeded its progress deadline of 8s: 2 of 4 pods updated", viewmodel.ErrDeadline, ended("failed")},
		{"rolled-back", rolloutstate.NewReplicaSetAvailable, "rolled back automatically from revision 2, which exceeded its progress deadline",
			viewmodel.ErrDeadline, ended("rolled_back")},
		{"invalid", rolloutstate.InvalidRolloutPartition, `stuck on an invalid value: kubedeploy.io/rollout-partition "banana": want a whole number ` +
			`of pods ("5") or a percentage of spec.replicas ("25%"); the rollout holds where it is: 0 of 4 pods updated`, viewmodel.ErrInvalidPolicy,
			waiting("invalid_policy")},
	}
	setUp := map[string]func(){
		"held":        func() { rollTo(ctx, t, ns, "held", "nginx:1.9", "nginx:1.9.3", "2", 600) },
		"kept-back":   func() { rollTo(ctx, t, ns, "kept-back", brokenImage, "nginx:1.9", "2", 600) },
		"failed":      func() { rollTo(ctx, t, ns, "failed", "nginx:1.9", brokenImage, "", 8) },
		"rolled-back": func() { rollTo(ctx, t, ns, "rolled-back", "nginx:1.9", brokenImage, "", 8) },
		"invalid":     func() { rollTo(ctx, t, ns, "invalid", "nginx:1.9", "nginx:1.9.3", "banana", 600) },
	}
	var wg sync.WaitGroup
	for _, f := range setUp {
		wg.Go(f)
	}
	wg.Wait()
	return cases
}

// rollTo creates ns/name at image from (4 replicas, maxSurge 1, maxUnavailable 1, progressDeadlineSeconds
// deadline), annotated with partition when not "" and opted into EX-2 when named rolled-back, waits for its first
// rollout to be observed (complete, unless from is broken), and sets image to.
func rollTo(ctx context.Context, t *testing.T, ns, name, from, to, partition string, deadline int32) {
	d := withStrategy(harness.NewDeployment(ns, name, 4, from), 1, 1)
	d.Spec.ProgressDeadlineSeconds = new(deadline)
	d.Annotations = map[string]string{}
	if partition != "" {
		d.Annotations[rolloutstate.RolloutPartitionAnnotation] = partition
	}
	if name == "rolled-back" {
		d.Annotations[rolloutstate.RollbackOnProgressDeadlineAnnotation] = "true"
	}
	createDeployment(ctx, t, d)
	if from == brokenImage {
		waitDeployment(t, ns, name, "4 broken pods", func(d *appsv1.Deployment) bool { return observed(d) && d.Status.Replicas == 4 })
	} else {
		harness.WaitComplete(t, env.Client, ns, name, rolloutTimeout)
	}
	if name == "rolled-back" {
		waitDeployment(t, ns, name, "revision 1 recorded complete", func(d *appsv1.Deployment) bool {
			return d.Annotations[rolloutstate.CompleteRevisionAnnotation] == "1"
		})
	}
	setImage(ctx, t, ns, name, name, to)
}

// runRollout runs `kubedeploy rollout ARGS -n ns` against the test cluster in this process and returns what
// it printed (stdout and stderr) and its error.
func runRollout(ctx context.Context, ns string, args ...string) (string, error) {
	cmd := rollout.NewCommand(rollout.Options{DefaultKubeconfig: env.ControlPlane.KubeconfigPath()})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "-n", ns))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// metricHas reports whether the process's registry has metric name for Deployment ns/name with label=value.
func metricHas(t *testing.T, name, ns, deployment, label, value string) bool {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["namespace"] == ns && l["deployment"] == deployment && l[label] == value {
				return true
			}
		}
	}
	return false
}
