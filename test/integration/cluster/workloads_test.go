package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// jobSpec is `kubectl create job NAME --image=busybox -- true`'s spec with completions pods in all.
func jobSpec(completions int32) batchv1.JobSpec {
	return batchv1.JobSpec{
		Completions: &completions,
		Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
		}},
	}
}

// jobCondition returns j's condition of type ct, or nil.
func jobCondition(j *batchv1.Job, ct batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == ct {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// TestJobCompletes: a Job's simulated pods run, succeed one startup delay after they are Ready, and the Job
// controller completes the Job (issue 22: `kubectl create job j1 --image=busybox -- true` stayed Running 0/1).
func TestJobCompletes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j1"}, Spec: jobSpec(2)}
	if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *batchv1.Job
	harness.Eventually(t, time.Minute, "Job j1 to complete", func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, "j1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = j
		c := jobCondition(j, batchv1.JobComplete)
		return c != nil && c.Status == v1.ConditionTrue, nil
	})
	if last.Status.Succeeded != 2 || last.Status.Failed != 0 || last.Status.CompletionTime == nil {
		t.Errorf("complete Job j1: succeeded %d, failed %d, completionTime %v; want 2, 0, set",
			last.Status.Succeeded, last.Status.Failed, last.Status.CompletionTime)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=j1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("Job j1 has %d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != v1.PodSucceeded || podReady(&p) {
			t.Errorf("pod %s: phase %s, ready %v; want Succeeded and not ready", p.Name, p.Status.Phase, podReady(&p))
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
				t.Errorf("pod %s container %s: state %+v, want terminated with exit code 0 (Completed)", p.Name, cs.Name, cs.State)
			}
		}
	}
}

// TestCronJobCreatesJobs: a CronJob due every minute gets a Job from the cronjob controller within its first
// minute, and that Job completes, so the CronJob records a successful run (issue 22).
func TestCronJobCreatesJobs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec(1)},
		},
	}
	created, err := env.Client.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first run is at the next full minute: at most 60 s away, plus the controller's own slack.
	harness.Eventually(t, 2*time.Minute, "CronJob every-minute to record a successful Job", func(ctx context.Context) (bool, error) {
		c, err := env.Client.BatchV1().CronJobs(ns).Get(ctx, "every-minute", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return c.Status.LastScheduleTime != nil && c.Status.LastSuccessfulTime != nil, nil
	})
	jobs, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owned int
	for _, j := range jobs.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == created.UID {
			owned++
			if !strings.HasPrefix(j.Name, "every-minute-") {
				t.Errorf("Job %s of CronJob every-minute is not named after it", j.Name)
			}
		}
	}
	if owned == 0 {
		t.Errorf("CronJob every-minute recorded a successful run but owns none of the Jobs %v", jobs.Items)
	}
}

// quantity returns list[name] as an integer, or -1 when it is not there.
func quantity(list v1.ResourceList, name v1.ResourceName) int64 {
	q, ok := list[name]
	if !ok {
		return -1
	}
	return q.Value()
}

// TestResourceQuotaCountsPods: `kubectl create quota q1 --hard=pods=3` gets a status from the resourcequota
// controller that counts the namespace's pods; a pod over the quota is refused by the API server's admission with
// "exceeded quota", and kubedeploy's ReplicaSet controller reports the refused creation on the ReplicaSet as a
// ReplicaFailure condition (RS-17, FailedCreate; upstream e2e's "exceeded quota" spec) (issue 22).
func TestResourceQuotaCountsPods(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	quota := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q1"},
		Spec:       v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("3")}},
	}
	if _, err := env.Client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, ns, "q1", 0)
	d := harness.NewDeployment(ns, "web", 3, "nginx:1.9")
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)
	waitQuotaUsed(t, ns, "q1", 3)

	extra := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-too-many"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "nginx:1.9"}}},
	}
	_, err := env.Client.CoreV1().Pods(ns).Create(ctx, extra, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: q1") {
		t.Fatalf("creating a 4th pod under a quota of 3: err = %v, want Forbidden: exceeded quota: q1", err)
	}

	harness.ScaleDeployment(ctx, t, env.Client, ns, "web", 4)
	harness.Eventually(t, time.Minute, "the ReplicaSet to report its refused pod as ReplicaFailure", func(ctx context.Context) (bool, error) {
		rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == "ReplicaFailure" && c.Status == v1.ConditionTrue && c.Reason == "FailedCreate" &&
					strings.Contains(c.Message, "exceeded quota") {
					return true, nil
				}
			}
		}
		return false, nil
	})
	waitQuotaUsed(t, ns, "q1", 3)
}

// waitQuotaUsed waits until ResourceQuota ns/name's status.used counts want pods against a hard limit.
func waitQuotaUsed(t *testing.T, ns, name string, want int64) {
	t.Helper()
	var used, hard int64
	harness.Eventually(t, time.Minute, fmt.Sprintf("ResourceQuota %s to count %d pods", name, want), func(ctx context.Context) (bool, error) {
		q, err := env.Client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used, hard = quantity(q.Status.Used, v1.ResourcePods), quantity(q.Status.Hard, v1.ResourcePods)
		return used == want && hard >= 0, nil
	})
	t.Logf("ResourceQuota %s: pods used %d of %d", name, used, hard)
}

// TestPodDisruptionBudgetReportsAllowedDisruptions: a PodDisruptionBudget with minAvailable 2 over a Deployment of
// 3 ready pods reports 1 allowed disruption from the disruption controller, and the eviction API honours it: one
// eviction is allowed, and with the budget spent the next is refused with 429 until the evicted pod's replacement
// is ready (issue 22).
func TestPodDisruptionBudgetReportsAllowedDisruptions(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	d := harness.NewDeployment(ns, "web", 3, "nginx:1.9")
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", time.Minute)
	minAvailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: d.Spec.Selector},
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var status policyv1.PodDisruptionBudgetStatus
	harness.Eventually(t, time.Minute, "PodDisruptionBudget web to allow 1 disruption", func(ctx context.Context) (bool, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = p.Status
		return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1, nil
	})
	if status.CurrentHealthy != 3 || status.DesiredHealthy != 2 || status.ExpectedPods != 3 {
		t.Errorf("PodDisruptionBudget status: healthy %d, desired %d, expected %d; want 3, 2, 3",
			status.CurrentHealthy, status.DesiredHealthy, status.ExpectedPods)
	}

	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 2 {
		t.Fatalf("Deployment web has %d pods, want 3", len(pods.Items))
	}
	evict := func(name string) error {
		return env.Client.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if err := evict(pods.Items[0].Name); err != nil {
		t.Fatalf("evicting %s with 1 disruption allowed: %v", pods.Items[0].Name, err)
	}
	// The first eviction spent the budget; the replacement pod needs a startup delay (1 s) to be ready.
	if err := evict(pods.Items[1].Name); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting %s with the budget spent: err = %v, want 429 TooManyRequests", pods.Items[1].Name, err)
	}
	// The Deployment replaces the evicted pod, and the budget allows a disruption again.
	harness.Eventually(t, time.Minute, "PodDisruptionBudget web to allow 1 disruption again", func(ctx context.Context) (bool, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.DisruptionsAllowed == 1 && p.Status.CurrentHealthy == 3, err
	})
}

// TestDaemonSetRunsOnEveryNode: the daemonset controller puts one ready pod on each simulated node (issue 22).
func TestDaemonSetRunsOnEveryNode(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "fluentd:1.0"}}},
			},
		},
	}
	if _, err := env.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := int32(env.ControlPlane.Nodes())
	harness.Eventually(t, time.Minute, fmt.Sprintf("DaemonSet agent to have a ready pod on each of %d nodes", nodes), func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.DesiredNumberScheduled == nodes && s.NumberReady == nodes && s.NumberAvailable == nodes, nil
	})
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]int{}
	for _, p := range pods.Items {
		onNode[p.Spec.NodeName]++
	}
	if len(onNode) != int(nodes) || len(pods.Items) != int(nodes) {
		t.Errorf("DaemonSet agent pods per node = %v, want one on each of %d nodes", onNode, nodes)
	}
}
