package unavailable

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// running returns a scheduled, running pod whose Ready condition is ready,
// turned so at readySince.
func running(name string, ready bool, readySince time.Time) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	start := metav1.NewTime(now.Add(-time.Minute))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: start},
		Spec:       v1.PodSpec{NodeName: "node-1"},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &start,
			Conditions: []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue},
				{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(readySince)},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
		},
	}
}

func waiting(name, reason, msg string) *v1.Pod {
	p := running(name, false, now)
	p.Status.Phase = v1.PodPending
	p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
	return p
}

func TestOf(t *testing.T) {
	deleted := running("deleted", true, now.Add(-time.Hour))
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	unschedulable := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u"}, Status: v1.PodStatus{Phase: v1.PodPending,
		Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}}}
	crashed := running("crashed", false, now)
	crashed.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}
	for _, tc := range []struct {
		pod      *v1.Pod
		minReady int32
		reason   string
		message  string // a substring
	}{
		{deleted, 0, Terminating, "deleted at"},
		{unschedulable, 0, "Unschedulable", "Insufficient cpu"},
		{&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, 0, Pending, "not scheduled yet"},
		{waiting("pull", "ImagePullBackOff", `Back-off pulling image "nginx:broken"`), 0, "ImagePullBackOff", `container app: Back-off pulling image "nginx:broken"`},
		{waiting("crash", "CrashLoopBackOff", ""), 0, "CrashLoopBackOff", "container app"},
		{crashed, 0, "Error", "exit code 2"},
		{running("starting", false, now), 0, NotReady, "not Ready after 1m0s"},
		{running("young", true, now.Add(-3*time.Second)), 10, MinReadySeconds, "Ready for 3s of minReadySeconds 10s"},
		{&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "low on memory"}}, 0, Failed, "low on memory"},
	} {
		reason, msg, ok := Of(tc.pod, tc.minReady, now)
		if !ok || reason != tc.reason || !strings.Contains(msg, tc.message) {
			t.Errorf("%s: Of = %q, %q, %v; want %q with %q", tc.pod.Name, reason, msg, ok, tc.reason, tc.message)
		}
	}
	if reason, _, ok := Of(running("ok", true, now), 0, now); ok {
		t.Errorf("a Ready pod without minReadySeconds reported %q", reason)
	}
	if reason, _, ok := Of(running("old-enough", true, now.Add(-time.Minute)), 10, now); ok {
		t.Errorf("a pod Ready for 60 s of minReadySeconds 10 reported %q", reason)
	}
}

// Groups: one group per reason, largest first, pod names sorted, available
// pods left out.
func TestGroups(t *testing.T) {
	pods := []*v1.Pod{
		waiting("web-c", "ImagePullBackOff", "c"),
		running("web-ok", true, now.Add(-time.Hour)),
		waiting("web-a", "ImagePullBackOff", "a"),
		running("web-b", false, now),
	}
	got := Groups(pods, 0, now)
	if len(got) != 2 {
		t.Fatalf("groups %+v", got)
	}
	if got[0].Reason != "ImagePullBackOff" || !slices.Equal(got[0].Pods, []string{"web-a", "web-c"}) || got[0].Message != "container app: a" {
		t.Errorf("first group %+v", got[0])
	}
	if got[1].Reason != NotReady || !slices.Equal(got[1].Pods, []string{"web-b"}) {
		t.Errorf("second group %+v", got[1])
	}
}

// Failing: the failures that do not resolve by themselves (Persistent waiting reasons) and a pod Running but
// not Ready for longer than it is given; not what a rollout goes through by itself.
func TestFailing(t *testing.T) {
	const given = 5 * time.Second
	deletedPull := waiting("deleted-pull", "ImagePullBackOff", "")
	deletedPull.DeletionTimestamp = &metav1.Time{Time: now}
	pendingNotReady := running("pending-not-ready", false, now.Add(-time.Hour))
	pendingNotReady.Status.Phase = v1.PodPending
	noTransition := running("no-transition-time", false, time.Time{}) // started a minute ago
	// A readiness probe that starts after 20 s and passes at the earliest 10 s later: 30 s allowed beyond given.
	probed := running("probed", false, now.Add(-given-20*time.Second))
	probed.Spec.Containers = []v1.Container{{Name: "app", ReadinessProbe: &v1.Probe{InitialDelaySeconds: 20}}}
	probedLong := probed.DeepCopy()
	probedLong.Name = "probed-long"
	probedLong.Status.Conditions[1].LastTransitionTime = metav1.NewTime(now.Add(-given - 31*time.Second))
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		reason string // "": not failing
	}{
		{"ImagePullBackOff", waiting("pull", "ImagePullBackOff", `Back-off pulling image "nginx:broken"`), "ImagePullBackOff"},
		{"ErrImagePull", waiting("err-pull", "ErrImagePull", ""), "ErrImagePull"},
		{"CrashLoopBackOff", waiting("crash", "CrashLoopBackOff", ""), "CrashLoopBackOff"},
		{"CreateContainerConfigError", waiting("config", "CreateContainerConfigError", `secret "x" not found`), "CreateContainerConfigError"},
		{"never Ready: not Ready for longer than given", running("never-ready", false, now.Add(-given-time.Second)), NotReady},
		{"never Ready: since its start without a transition time", noTransition, NotReady},
		{"still starting: not Ready for less than given", running("starting", false, now.Add(-given+time.Second)), ""},
		{"still starting: within its readiness probe's first pass", probed, ""},
		{"never Ready: longer than given and its readiness probe's first pass", probedLong, NotReady},
		{"ContainerCreating passes by itself", waiting("creating", ContainerCreating, ""), ""},
		{"Unschedulable may pass as old pods go", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u"}, Status: v1.PodStatus{Phase: v1.PodPending,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable"}}}}, ""},
		{"Terminating comes first", deletedPull, ""},
		{"not Running", pendingNotReady, ""},
		{"Ready", running("ready", true, now.Add(-time.Hour)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, _, ok := Failing(tc.pod, given, now)
			if ok != (tc.reason != "") || reason != tc.reason {
				t.Errorf("Failing = %q, %v; want %q", reason, ok, tc.reason)
			}
		})
	}
}

// ProbeAllowance: the longest of the startup probe's time to start and the readiness probe's first pass,
// with the API server's defaults for unset fields.
func TestProbeAllowance(t *testing.T) {
	for _, tc := range []struct {
		name       string
		containers []v1.Container
		want       time.Duration
	}{
		{"no probes", []v1.Container{{Name: "a"}}, 0},
		{"readiness, defaults", []v1.Container{{Name: "a", ReadinessProbe: &v1.Probe{InitialDelaySeconds: 5}}}, 15 * time.Second},
		{"readiness, set", []v1.Container{{Name: "a", ReadinessProbe: &v1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 2, SuccessThreshold: 3}}}, 11 * time.Second},
		{"startup, defaults", []v1.Container{{Name: "a", StartupProbe: &v1.Probe{}}}, 30 * time.Second},
		{"the longest container", []v1.Container{
			{Name: "a", ReadinessProbe: &v1.Probe{PeriodSeconds: 1}},
			{Name: "b", StartupProbe: &v1.Probe{PeriodSeconds: 5, FailureThreshold: 12}}}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProbeAllowance(&v1.Pod{Spec: v1.PodSpec{Containers: tc.containers}}); got != tc.want {
				t.Errorf("ProbeAllowance = %v, want %v", got, tc.want)
			}
		})
	}
}
