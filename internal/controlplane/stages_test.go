package controlplane

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

func stageNames(group []*internalversion.Stage) []string {
	var names []string
	for _, s := range group {
		names = append(names, s.Name)
	}
	return names
}

func TestStagesGolden(t *testing.T) {
	got, err := stages(3*time.Second, 2500*time.Millisecond)
	if err != nil {
		t.Fatalf("stages() = %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("stages() has %d resource groups, want Node and Pod", len(got))
	}
	if names := stageNames(got[nodeStageRef]); !slices.Equal(names, []string{StageNodeHeartbeat, StageNodeInitialize}) {
		t.Errorf("node stages = %v", names)
	}
	wantNames := []string{StagePodComplete, StagePodCrashLoopCrash, StagePodCrashLoopRestart, StagePodDelete, StagePodImagePullBackOff, StagePodReady}
	if names := stageNames(got[podStageRef]); !slices.Equal(names, wantNames) {
		t.Errorf("pod stages = %v, want %v", names, wantNames)
	}
	wantDelay := map[string]int64{StagePodReady: 3000, StagePodImagePullBackOff: 3000, StagePodComplete: 3000, StagePodDelete: 2500,
		StagePodCrashLoopCrash: CrashLoopRunTime.Milliseconds(), StagePodCrashLoopRestart: 3000}
	if CrashLoopRunTime != 5*time.Second {
		t.Errorf("CrashLoopRunTime = %s; docs/local-cluster.md says 5 s", CrashLoopRunTime)
	}
	wantKeys := map[string][]string{
		StagePodReady: {".metadata.deletionTimestamp", ".spec.nodeName", brokenImageQuery, ".status.phase",
			readyQuery, crashLoopBackOffQuery},
		StagePodImagePullBackOff: {".metadata.deletionTimestamp", ".spec.nodeName", brokenImageQuery, ".status.podIP"},
		StagePodDelete:           {".metadata.deletionTimestamp"},
		StagePodComplete: {".metadata.deletionTimestamp", `.metadata.ownerReferences[]? | select(.controller == true) | .kind`,
			crashLoopImageQuery, ".status.phase", readyQuery},
		StagePodCrashLoopCrash:   {".metadata.deletionTimestamp", crashLoopImageQuery, ".status.phase", readyQuery, crashLoopBackOffQuery},
		StagePodCrashLoopRestart: {".metadata.deletionTimestamp", crashLoopBackOffQuery},
	}
	for _, s := range got[podStageRef] {
		if s.Spec.Delay == nil || s.Spec.Delay.DurationMilliseconds == nil || *s.Spec.Delay.DurationMilliseconds != wantDelay[s.Name] {
			t.Errorf("stage %s delay = %+v, want %dms", s.Name, s.Spec.Delay, wantDelay[s.Name])
		} else if s.Spec.Delay.JitterDurationMilliseconds != nil || s.Spec.Delay.JitterDurationFrom != nil {
			t.Errorf("stage %s must have no jitter", s.Name)
		}
		var keys []string
		for _, e := range s.Spec.Selector.MatchExpressions {
			if e.JQ == nil {
				t.Fatalf("stage %s has a non-jq selector", s.Name)
			}
			keys = append(keys, e.JQ.Key)
		}
		if !slices.Equal(keys, wantKeys[s.Name]) {
			t.Errorf("stage %s selector keys = %q, want %q", s.Name, keys, wantKeys[s.Name])
		}
	}
	del := got[podStageRef][slices.Index(wantNames, StagePodDelete)]
	if len(del.Spec.Steps) == 0 || !del.Spec.Steps[len(del.Spec.Steps)-1].Delete {
		t.Errorf("pod-delete must end with a delete step: %+v", del.Spec.Steps)
	}
}

// The jq selectors several pod stages share; a stage that must never match alongside another holds the same key
// with the opposite operator.
const (
	// brokenImageQuery: pod-ready (DoesNotExist) and pod-image-pull-backoff (Exists).
	brokenImageQuery = `.spec.containers[].image | select(test(":(broken[^:/@]*|404)(@.*)?$"))`
	// crashLoopImageQuery: pod-complete (DoesNotExist) and pod-crashloop-crash (Exists).
	crashLoopImageQuery = `.spec.containers[].image | select(test(":crashloop[^:/@]*(@.*)?$"))`
	// crashLoopBackOffQuery: pod-ready and pod-crashloop-crash (DoesNotExist), pod-crashloop-restart (Exists).
	crashLoopBackOffQuery = `.status.containerStatuses[]?.state.waiting.reason | select(. == "CrashLoopBackOff")`
	// readyQuery: pod-ready (NotIn True), pod-complete and pod-crashloop-crash (In True).
	readyQuery = `.status.conditions[] | select(.type == "Ready") | .status`
)

func testPod(images ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "kwok-node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	for i, image := range images {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Image: image})
	}
	return pod
}

// readyPod makes pod Running and Ready on its node and, when ownerKind is set, controlled by an owner of that kind.
func readyPod(pod *corev1.Pod, ownerKind string) *corev1.Pod {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.244.0.5"
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if ownerKind != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{Kind: ownerKind, Name: "owner", Controller: new(true)}}
	}
	return pod
}

// podStageCase is a pod and the pod stages KWOK may apply to it.
type podStageCase struct {
	name   string
	pod    func() *corev1.Pod
	stages []string
}

// imageStageCases are TestPodStagesMatch's cases about scheduling and the
// container image: which images count as broken.
func imageStageCases() []podStageCase {
	return []podStageCase{
		{name: "scheduled pod becomes ready", pod: func() *corev1.Pod { return testPod("nginx:1.25") }, stages: []string{StagePodReady}},
		{name: "untagged image becomes ready", pod: func() *corev1.Pod { return testPod("nginx") }, stages: []string{StagePodReady}},
		{name: "unscheduled pod is left alone", pod: func() *corev1.Pod { p := testPod("nginx"); p.Spec.NodeName = ""; return p }},
		{name: "tag containing broken later is fine", pod: func() *corev1.Pod { return testPod("nginx:unbroken") }, stages: []string{StagePodReady}},
		{name: "repository named broken is fine", pod: func() *corev1.Pod { return testPod("broken/nginx:1.0") }, stages: []string{StagePodReady}},
		{name: "registry port then broken tag", pod: func() *corev1.Pod { return testPod("localhost:5000/nginx:broken") }, stages: []string{StagePodImagePullBackOff}},
		{name: "broken tag", pod: func() *corev1.Pod { return testPod("nginx:broken") }, stages: []string{StagePodImagePullBackOff}},
		{name: "broken- tag", pod: func() *corev1.Pod { return testPod("nginx:broken-1") }, stages: []string{StagePodImagePullBackOff}},
		{name: "broken tag with digest", pod: func() *corev1.Pod { return testPod("nginx:broken@sha256:abc") }, stages: []string{StagePodImagePullBackOff}},
		{name: "404 tag (upstream e2e's non-existent image)", pod: func() *corev1.Pod { return testPod("webserver:404") }, stages: []string{StagePodImagePullBackOff}},
		{name: "404 tag with digest", pod: func() *corev1.Pod { return testPod("webserver:404@sha256:abc") }, stages: []string{StagePodImagePullBackOff}},
		{name: "registry port 404 is fine", pod: func() *corev1.Pod { return testPod("registry:404/webserver:1.0") }, stages: []string{StagePodReady}},
		{name: "tag 4040 is fine", pod: func() *corev1.Pod { return testPod("webserver:4040") }, stages: []string{StagePodReady}},
	}
}

// lifecycleStageCases are TestPodStagesMatch's cases about the pod's owner,
// phase, conditions and deletion.
func lifecycleStageCases() []podStageCase {
	now := metav1.Now()
	return []podStageCase{
		{name: "running Job pod completes", pod: func() *corev1.Pod { return readyPod(testPod("busybox"), "Job") }, stages: []string{StagePodComplete}},
		{name: "running ReplicaSet pod keeps running", pod: func() *corev1.Pod { return readyPod(testPod("nginx"), "ReplicaSet") }},
		{name: "Job pod becomes ready first", pod: func() *corev1.Pod {
			p := testPod("busybox")
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "j", Controller: new(true)}}
			return p
		}, stages: []string{StagePodReady}},
		{name: "succeeded Job pod stays put", pod: func() *corev1.Pod {
			p := readyPod(testPod("busybox"), "Job")
			p.Status.Phase = corev1.PodSucceeded
			p.Status.Conditions[1].Status = corev1.ConditionFalse
			return p
		}},
		{name: "one broken container of two", pod: func() *corev1.Pod { return testPod("busybox:1", "nginx:broken") }, stages: []string{StagePodImagePullBackOff}},
		{name: "broken pod in backoff stays put", pod: func() *corev1.Pod {
			p := testPod("nginx:broken")
			p.Status.PodIP = "10.244.0.5"
			return p
		}},
		{name: "ready pod stays put", pod: func() *corev1.Pod {
			p := testPod("nginx")
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP = "10.244.0.5"
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			return p
		}},
		{name: "deleted pod is removed", pod: func() *corev1.Pod { p := testPod("nginx"); p.DeletionTimestamp = &now; return p }, stages: []string{StagePodDelete}},
		{name: "deleted broken pod is removed", pod: func() *corev1.Pod {
			p := testPod("nginx:broken")
			p.DeletionTimestamp = &now
			p.Finalizers = []string{"example.com/keep"}
			return p
		}, stages: []string{StagePodDelete}},
	}
}

func TestPodStagesMatch(t *testing.T) {
	all, err := stages(time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := lifecycle.NewLifecycle(all[podStageRef])
	if err != nil {
		t.Fatalf("NewLifecycle() = %v", err)
	}
	for _, tc := range slices.Concat(imageStageCases(), lifecycleStageCases(), crashLoopStageCases()) {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod()
			matched, err := lc.ListAllPossible(context.Background(), &lifecycle.Event{Labels: pod.Labels, Annotations: pod.Annotations, Data: pod})
			if err != nil {
				t.Fatalf("match: %v", err)
			}
			var names []string
			for _, s := range matched {
				names = append(names, s.Name())
			}
			if !slices.Equal(names, tc.stages) {
				t.Errorf("matched stages = %v, want %v", names, tc.stages)
			}
		})
	}
}

func TestStageFilesAreStages(t *testing.T) {
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := stageFiles.ReadFile("stages/" + e.Name())
		s, err := decodeStage(data)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if s.Name+".yaml" != e.Name() {
			t.Errorf("stage %q lives in %s; name files after their stage", s.Name, e.Name())
		}
	}
	if _, err := decodeStage([]byte("kind: Pod\napiVersion: v1\n")); err == nil || !strings.Contains(err.Error(), "Stage") {
		t.Errorf("decodeStage(Pod) = %v, want kind error", err)
	}
}

// TestStagesMatchConcurrentlyAfterWarmUp: after warmStages, KWOK's node and
// pod stages can build their CEL environments at the same moment, as KWOK's
// two controllers do when `up` restarts with nodes and pods in place. Without
// the warm-up, easycel's unlocked type caches are written concurrently
// ("fatal error: concurrent map writes"; `go test -race` reports it).
func TestStagesMatchConcurrentlyAfterWarmUp(t *testing.T) {
	all, err := stages(time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := warmStages(ctx, all); err != nil {
		t.Fatalf("warmStages: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		ref, obj := podStageRef, any(testPod("nginx:1.25"))
		if i%2 == 1 {
			ref, obj = nodeStageRef, any(&corev1.Node{})
		}
		wg.Go(func() {
			lc, err := lifecycle.NewLifecycle(all[ref]) // fresh stages: each builds its environment
			if err == nil {
				_, err = lc.ListAllPossible(ctx, &lifecycle.Event{Data: obj})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
