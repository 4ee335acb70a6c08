package replicaset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
)

// fullPod returns a pod as the API server would send it, random in every
// field the ReplicaSet controller reads (RS-4, RS-14, RS-15) and filled with
// fields it does not read (containers, volumes, extra conditions, container
// states, annotations), so that a transform dropping a field the controller
// reads changes a rank or a count.
func fullPod(r *rand.Rand, i int) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	phases := []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodRunning, v1.PodUnknown, v1.PodSucceeded, v1.PodFailed}
	at := func() metav1.Time { return metav1.NewTime(testNow.Add(-time.Duration(r.IntN(4000)) * time.Second)) }
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("p-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%03d", r.IntN(1000))),
			ResourceVersion: fmt.Sprint(r.IntN(1e6)), CreationTimestamp: at(),
			Labels:        map[string]string{"app": "web", "pod-template-hash": "abc"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z", "note": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
			Finalizers:    []string{"example.com/f"},
		},
		Spec: v1.PodSpec{
			NodeName:       fmt.Sprintf("node-%d", r.IntN(3)),
			InitContainers: []v1.Container{{Name: "side", Image: "envoy", RestartPolicy: &always}, {Name: "init", Image: "busybox"}},
			Containers: []v1.Container{{Name: "app", Image: "nginx:1.9", Env: []v1.EnvVar{{Name: "A", Value: "b"}},
				Ports: []v1.ContainerPort{{ContainerPort: 80}}}},
			Volumes:     []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists}},
		},
		Status: v1.PodStatus{
			Phase: phases[r.IntN(len(phases))], HostIP: "10.0.0.1", PodIP: "10.1.0.1", StartTime: ptr.To(at()),
			Conditions: []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: at(), Message: "scheduled"},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: at()},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: int32(r.IntN(3)), Image: "nginx:1.9",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at()}}}},
			InitContainerStatuses: []v1.ContainerStatus{{Name: "side", RestartCount: int32(r.IntN(3))}, {Name: "init", RestartCount: 7}},
		},
	}
	if r.IntN(3) > 0 {
		status := v1.ConditionTrue
		if r.IntN(4) == 0 {
			status = v1.ConditionFalse
		}
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: status, LastTransitionTime: at(), Reason: "r"})
	}
	if r.IntN(5) == 0 {
		p.Spec.NodeName = ""
	}
	if r.IntN(4) == 0 {
		p.Annotations[PodDeletionCostAnnotation] = fmt.Sprint(r.IntN(5) - 2)
	}
	if r.IntN(6) == 0 {
		p.DeletionTimestamp = ptr.To(at())
	}
	if r.IntN(8) == 0 {
		p.Labels = map[string]string{"app": "web"}
	}
	fullPodStates(r, p)
	return p
}

// fullPodStates sets random container states and an unschedulable condition on p.
func fullPodStates(r *rand.Rand, p *v1.Pod) {
	// What the pod cache keeps for why a pod is not available (issue 11) must not move a rank: container
	// states on any container, of any restart count, and an unschedulable pod.
	states := []v1.ContainerState{
		{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
		{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}},
		{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
		{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
	}
	for _, cs := range []*v1.ContainerStatus{&p.Status.InitContainerStatuses[0], &p.Status.InitContainerStatuses[1], &p.Status.ContainerStatuses[0]} {
		if r.IntN(4) == 0 {
			cs.State = states[r.IntN(len(states))]
		}
	}
	if r.IntN(6) == 0 {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: "log", RestartCount: int32(r.IntN(3)),
			State: states[r.IntN(len(states))]})
	}
	if r.IntN(6) == 0 {
		p.Status.Conditions[0] = v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}
	}
}

// TestSlimPodsRankAndCountLikeFullPods: the pod cache keeps only what
// podcache.Transform lists; on random pods, the ReplicaSet controller must
// pick the same scale-down victims (RS-14), count the same active pods (RS-4)
// and compute the same status (RS-15) from slim pods as from full ones.
func TestSlimPodsRankAndCountLikeFullPods(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.ReplicaSetSpec{MinReadySeconds: 600,
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "pod-template-hash": "abc"}}}},
	}
	for round := range 200 {
		var full, slim []*v1.Pod
		for i := range 1 + r.IntN(30) {
			p := fullPod(r, i)
			before := p.DeepCopy()
			s, err := podcache.Transform(p)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(p, before) {
				t.Fatalf("Transform changed the pod it was given")
			}
			full, slim = append(full, p), append(slim, s.(*v1.Pod))
		}
		for i := range full {
			if isPodActive(full[i]) != isPodActive(slim[i]) {
				t.Fatalf("seed %d round %d: isPodActive differs for %s", seed, round, full[i].Name)
			}
		}
		active := func(pods []*v1.Pod) []*v1.Pod {
			return slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool { return !isPodActive(p) })
		}
		fullActive, slimActive := active(full), active(slim)
		for diff := 1; diff < len(fullActive); diff++ {
			if a, b := names(podsToDelete(fullActive, full, diff, testNow, nil)), names(podsToDelete(slimActive, slim, diff, testNow, nil)); !slices.Equal(a, b) {
				t.Fatalf("seed %d round %d: victims of %d differ: full %v, slim %v", seed, round, diff, a, b)
			}
		}
		a := calculateStatus(rs, fullActive, nil, nil, testNow)
		b := calculateStatus(rs, slimActive, nil, nil, testNow)
		if !equality.Semantic.DeepEqual(a, b) {
			t.Fatalf("seed %d round %d: status differs: full %+v, slim %+v", seed, round, a, b)
		}
		next, ok := nextAvailableCheck(rs, fullActive, a, testNow)
		if n2, ok2 := nextAvailableCheck(rs, slimActive, b, testNow); n2 != next || ok2 != ok {
			t.Fatalf("seed %d round %d: next available check: full %v %t, slim %v %t", seed, round, next, ok, n2, ok2)
		}
	}
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
