package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// crashLoopBackOffPod is a Running pod of images whose first container has crashed: not Ready, waiting in
// CrashLoopBackOff, as pod-crashloop-crash leaves it.
func crashLoopBackOffPod(images ...string) *corev1.Pod {
	p := readyPod(testPod(images...), "ReplicaSet")
	p.Status.Conditions[1].Status = corev1.ConditionFalse
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c0", Image: images[0], RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	return p
}

// crashLoopStageCases are TestPodStagesMatch's cases about images tagged "crashloop*": which images crash, and that
// at every point of the loop exactly one stage (or none) applies, so pod-ready, pod-complete and pod-delete never
// race the crash-loop stages.
func crashLoopStageCases() []podStageCase {
	now := metav1.Now()
	return []podStageCase{
		{name: "crashloop pod starts like any pod", pod: func() *corev1.Pod { return testPod("nginx:crashloop") }, stages: []string{StagePodReady}},
		{name: "ready crashloop pod crashes", pod: func() *corev1.Pod { return readyPod(testPod("nginx:crashloop"), "ReplicaSet") }, stages: []string{StagePodCrashLoopCrash}},
		{name: "crashloop- tag with digest crashes", pod: func() *corev1.Pod {
			return readyPod(testPod("localhost:5000/nginx:crashloop-2@sha256:abc"), "ReplicaSet")
		}, stages: []string{StagePodCrashLoopCrash}},
		{name: "one crashloop container of two crashes", pod: func() *corev1.Pod { return readyPod(testPod("busybox:1", "nginx:crashloop"), "") }, stages: []string{StagePodCrashLoopCrash}},
		{name: "tag containing crashloop later is fine", pod: func() *corev1.Pod { return readyPod(testPod("nginx:nocrashloop"), "ReplicaSet") }},
		{name: "repository named crashloop is fine", pod: func() *corev1.Pod { return readyPod(testPod("crashloop/nginx:1.0"), "ReplicaSet") }},
		{name: "registry named crashloop is fine", pod: func() *corev1.Pod { return testPod("registry:crashloop/nginx:1.0") }, stages: []string{StagePodReady}},
		{name: "ready crashloop Job pod crashes, never completes", pod: func() *corev1.Pod { return readyPod(testPod("busybox:crashloop"), "Job") }, stages: []string{StagePodCrashLoopCrash}},
		{name: "crashed pod restarts, pod-ready keeps off", pod: func() *corev1.Pod { return crashLoopBackOffPod("nginx:crashloop") }, stages: []string{StagePodCrashLoopRestart}},
		{name: "crashed pod whose image was fixed restarts", pod: func() *corev1.Pod {
			p := crashLoopBackOffPod("nginx:crashloop")
			p.Spec.Containers[0].Image = "nginx:1"
			return p
		}, stages: []string{StagePodCrashLoopRestart}},
		{name: "crashloop and broken images: pull backoff", pod: func() *corev1.Pod { return testPod("nginx:crashloop", "nginx:broken") }, stages: []string{StagePodImagePullBackOff}},
		{name: "deleted ready crashloop pod is removed", pod: func() *corev1.Pod {
			p := readyPod(testPod("nginx:crashloop"), "ReplicaSet")
			p.DeletionTimestamp = &now
			return p
		}, stages: []string{StagePodDelete}},
		{name: "deleted crashed pod is removed", pod: func() *corev1.Pod {
			p := crashLoopBackOffPod("nginx:crashloop")
			p.DeletionTimestamp = &now
			return p
		}, stages: []string{StagePodDelete}},
	}
}

// stagePlayer applies pod stages the way KWOK's pod controller does: the one stage that matches, its status
// template rendered with a renderer like the controller's and applied as a strategic merge patch.
type stagePlayer struct {
	lc       lifecycle.Lifecycle
	renderer gotpl.Renderer
}

func newStagePlayer(t *testing.T) *stagePlayer {
	t.Helper()
	all, err := stages(time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := lifecycle.NewLifecycle(all[podStageRef])
	if err != nil {
		t.Fatal(err)
	}
	// NodeIPWith and PodIPWith are KWOK's pod controller's own template functions (pod-ready uses them).
	renderer := gotpl.NewRenderer(gotpl.FuncMap{
		"NodeIPWith": func(string) string { return nodeIP },
		"PodIPWith":  func(string, bool, string, string, string) (string, error) { return "10.244.0.5", nil },
	})
	return &stagePlayer{lc: lc, renderer: renderer}
}

// play requires that exactly the stage want matches pod, applies its steps to a copy of pod and returns the copy.
func (p *stagePlayer) play(t *testing.T, pod *corev1.Pod, want string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	matched, err := p.lc.ListAllPossible(ctx, &lifecycle.Event{Data: pod})
	if err != nil {
		t.Fatal(err)
	}
	if len(matched) != 1 || matched[0].Name() != want {
		t.Fatalf("matched stages %v, want only %s", stageNamesOf(matched), want)
	}
	out := pod.DeepCopy()
	_, err = matched[0].DoSteps(0, pod.Finalizers, pod, p.renderer,
		func(*internalversion.StageEvent) error { return nil },
		func() error { t.Fatalf("stage %s deleted the pod", want); return nil },
		func(patch *lifecycle.Patch) error { return applyPodPatch(out, patch) },
		func(*lifecycle.Apply) error { t.Fatalf("stage %s applied an object", want); return nil })
	if err != nil {
		t.Fatalf("stage %s: %v", want, err)
	}
	return out
}

func stageNamesOf(stages []*lifecycle.Stage) []string {
	var names []string
	for _, s := range stages {
		names = append(names, s.Name())
	}
	return names
}

// applyPodPatch applies a strategic merge patch to pod in place, as the API server does, and keeps the result's
// timestamps to the second, as the API server stores them.
func applyPodPatch(pod *corev1.Pod, patch *lifecycle.Patch) error {
	if patch.Type != types.StrategicMergePatchType {
		return fmt.Errorf("patch type %s, want a strategic merge patch", patch.Type)
	}
	orig, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, patch.Data, corev1.Pod{})
	if err != nil {
		return err
	}
	var result corev1.Pod
	if err := json.Unmarshal(patched, &result); err != nil {
		return err
	}
	if patched, err = json.Marshal(&result); err != nil { // metav1.Time marshals to the second
		return err
	}
	*pod = corev1.Pod{}
	return json.Unmarshal(patched, pod)
}

// TestCrashLoopStagesPlay plays the pod stages on a pod of a "crashloop" container and an nginx:1 sidecar: it
// starts Running and Ready (pod-ready), then crashes (restartCount 1, CrashLoopBackOff, last state exit code 1,
// not Ready), restarts (Ready, restartCount kept), crashes again (restartCount 2): the sidecar's status never
// changes.
func TestCrashLoopStagesPlay(t *testing.T) {
	player := newStagePlayer(t)
	steps := []struct {
		stage    string
		ready    bool
		restarts int32
		waiting  string // the crashloop container's waiting reason; "" when running
	}{
		{stage: StagePodReady, ready: true},
		{stage: StagePodCrashLoopCrash, restarts: 1, waiting: "CrashLoopBackOff"},
		{stage: StagePodCrashLoopRestart, ready: true, restarts: 1},
		{stage: StagePodCrashLoopCrash, restarts: 2, waiting: "CrashLoopBackOff"},
		{stage: StagePodCrashLoopRestart, ready: true, restarts: 2},
	}
	pod := testPod("nginx:crashloop", "nginx:1")
	var sidecar corev1.ContainerStatus
	for i, step := range steps {
		before := pod
		pod = player.play(t, pod, step.stage)
		if podReady(pod) != step.ready || pod.Status.Phase != corev1.PodRunning {
			t.Fatalf("step %d (%s): phase %s, Ready %v; want Running, Ready %v", i, step.stage, pod.Status.Phase, podReady(pod), step.ready)
		}
		if len(pod.Status.ContainerStatuses) != 2 {
			t.Fatalf("step %d (%s): container statuses %+v", i, step.stage, pod.Status.ContainerStatuses)
		}
		app := pod.Status.ContainerStatuses[0]
		checkCrashLoopContainer(t, step.stage, app, step.ready, step.restarts, step.waiting)
		if i == 0 {
			sidecar = pod.Status.ContainerStatuses[1]
		} else if got := pod.Status.ContainerStatuses[1]; !sameSidecar(got, sidecar) {
			t.Errorf("step %d (%s): sidecar status changed: %+v, was %+v", i, step.stage, got, sidecar)
		}
		if step.stage == StagePodCrashLoopCrash {
			checkCrashLastState(t, app, before.Status.ContainerStatuses[0])
		}
		if step.stage == StagePodCrashLoopRestart {
			checkReadyAgain(t, pod, before.Status.ContainerStatuses[0])
		}
	}
}

// sameSidecar reports whether the sidecar's status a is b, and still Ready and never restarted.
func sameSidecar(a, b corev1.ContainerStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb) && a.RestartCount == 0 && a.Ready
}

func checkCrashLoopContainer(t *testing.T, stage string, app corev1.ContainerStatus, ready bool, restarts int32, waiting string) {
	t.Helper()
	if app.Ready != ready || app.RestartCount != restarts {
		t.Errorf("%s: container ready %v, restartCount %d; want %v, %d", stage, app.Ready, app.RestartCount, ready, restarts)
	}
	switch {
	case waiting == "" && app.State.Running == nil:
		t.Errorf("%s: container state %+v, want running", stage, app.State)
	case waiting != "" && (app.State.Waiting == nil || app.State.Waiting.Reason != waiting):
		t.Errorf("%s: container state %+v, want waiting %s", stage, app.State, waiting)
	}
}

// checkCrashLastState: a crash records the run that ended: terminated, exit code 1, reason Error, started when the
// container last started.
func checkCrashLastState(t *testing.T, app, before corev1.ContainerStatus) {
	t.Helper()
	term := app.LastTerminationState.Terminated
	if term == nil || term.ExitCode != 1 || term.Reason != "Error" {
		t.Fatalf("crashed container lastState = %+v, want terminated with exit code 1, reason Error", app.LastTerminationState)
	}
	if before.State.Running == nil || !term.StartedAt.Equal(&before.State.Running.StartedAt) || term.FinishedAt.IsZero() {
		t.Errorf("crashed container lastState ran %s–%s, want from %+v", term.StartedAt, term.FinishedAt, before.State)
	}
}

// checkReadyAgain: a restart keeps the last state and leaves no trace of the crash on the pod's conditions.
func checkReadyAgain(t *testing.T, pod *corev1.Pod, before corev1.ContainerStatus) {
	t.Helper()
	app := pod.Status.ContainerStatuses[0]
	if got, was := app.LastTerminationState.Terminated, before.LastTerminationState.Terminated; got == nil ||
		got.ExitCode != was.ExitCode || got.Reason != was.Reason || !got.FinishedAt.Equal(&was.FinishedAt) {
		t.Errorf("restarted container lastState = %+v, want %+v", app.LastTerminationState, before.LastTerminationState)
	}
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && (c.Status != corev1.ConditionTrue || c.Reason != "" || c.Message != "") {
			t.Errorf("restarted pod condition %s = %s (%q, %q), want True without reason or message", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}
