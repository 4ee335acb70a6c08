package shadow

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// world is a Deployment as upstream's controllers leave it: hand-made, field by field.
type world struct {
	d    *appsv1.Deployment
	rss  []*appsv1.ReplicaSet
	pods []*v1.Pod
}

func template(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}},
	}
}

// completeWorld is Deployment web of replicas pods rolled to image (revision len(images)), every earlier
// image's ReplicaSet kept at 0, as upstream leaves a completed RollingUpdate (maxSurge 1, maxUnavailable 1).
func completeWorld(replicas int32, images ...string) *world {
	rev := len(images)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "d-uid", Generation: int64(rev), ResourceVersion: "100",
			Annotations: map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(rev)}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(images[rev-1]),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
			RevisionHistoryLimit: ptr.To[int32](10), ProgressDeadlineSeconds: ptr.To[int32](600),
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: int64(rev), Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, TerminatingReplicas: ptr.To[int32](0)},
	}
	w := &world{d: d}
	for i, image := range images {
		size := int32(0)
		if i == rev-1 {
			size = replicas
		}
		w.addReplicaSet(fmt.Sprintf("web-%d", i+1), image, i+1, size, size)
	}
	newRS := w.rss[rev-1].Name
	d.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: v1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.",
			LastUpdateTime: metav1.NewTime(now.Add(-time.Hour)), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
		{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS),
			LastUpdateTime: metav1.NewTime(now.Add(-time.Hour)), LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))},
	}
	return w
}

// addReplicaSet adds a ReplicaSet of the Deployment for image at revision rev, of size replicas with ready
// of them Ready (and available) pods and the rest not Ready.
func (w *world) addReplicaSet(name, image string, rev int, size, ready int32) *appsv1.ReplicaSet {
	hash := fmt.Sprint(rev * 1111)
	t := template(image)
	t.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: fmt.Sprint(10 + rev),
			Labels: t.Labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Duration(10-rev) * time.Hour)),
			Annotations: map[string]string{
				"deployment.kubernetes.io/revision":         fmt.Sprint(rev),
				"deployment.kubernetes.io/desired-replicas": fmt.Sprint(*w.d.Spec.Replicas),
				"deployment.kubernetes.io/max-replicas":     fmt.Sprint(*w.d.Spec.Replicas + 1),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(w.d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(size), Template: t,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}}},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: size, FullyLabeledReplicas: size, ReadyReplicas: ready, AvailableReplicas: ready, TerminatingReplicas: ptr.To[int32](0)},
	}
	w.rss = append(w.rss, rs)
	for i := range size {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", name, i), UID: types.UID(fmt.Sprintf("%s-pod-%d", name, i)),
				Labels: t.Labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), ResourceVersion: "5",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec:   v1.PodSpec{NodeName: "node-1"},
			Status: v1.PodStatus{Phase: v1.PodRunning},
		}
		if i < ready {
			pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
		}
		w.pods = append(w.pods, pod)
	}
	return rs
}

// check runs a Checker over w's objects in informer caches that never run (reads from the API server fail).
func check(t *testing.T, w *world) Report {
	t.Helper()
	r, err := checker(t, w, "http://127.0.0.1:1").Check(context.Background(), cache.ObjectName{Namespace: "default", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checker returns a Checker over w's objects in informer caches that never run, its reads sent to host.
func checker(t *testing.T, w *world, host string) *Checker {
	t.Helper()
	return checkerWith(t, w, host, nil)
}

// checkerWith is checker with templates as Sources.Templates.
func checkerWith(t *testing.T, w *world, host string, templates *rawtemplate.Store) *Checker {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	src := Sources{Deployments: factory.Apps().V1().Deployments(), ReplicaSets: factory.Apps().V1().ReplicaSets(), Pods: factory.Core().V1().Pods(),
		Templates: templates}
	c, err := NewChecker(&rest.Config{Host: host}, src, clocktesting.NewFakeClock(now))
	if err != nil {
		t.Fatal(err)
	}
	add := func(inf cache.SharedIndexInformer, obj any) {
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(src.Deployments.Informer(), w.d)
	for _, rs := range w.rss {
		add(src.ReplicaSets.Informer(), rs)
	}
	for _, p := range w.pods {
		add(src.Pods.Informer(), p)
	}
	return c
}

func describe(ds []Divergence) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("\n  " + d.String())
	}
	return b.String()
}

func TestCompleteRolloutHasNoDivergence(t *testing.T) {
	r := check(t, completeWorld(4, "nginx:1.0", "nginx:1.1"))
	if !r.Settled {
		t.Fatalf("not settled: %s", r.NotSettled)
	}
	if len(r.Divergences) != 0 {
		t.Errorf("a completed rollout as upstream leaves it: want no divergence, got:%s", describe(r.Divergences))
	}
}

// A scaled-up Deployment whose ReplicaSet upstream has not resized yet is not settled; once the sizes agree
// but the ReplicaSet is short of pods, neither.
func TestNotSettledStatesAreNotSynced(t *testing.T) {
	w := completeWorld(4, "nginx:1.0")
	w.d.Generation = 2
	if r := check(t, w); r.Settled || !strings.Contains(r.NotSettled, "observedGeneration") {
		t.Errorf("unobserved generation: settled %v (%s), want not settled for its observedGeneration", r.Settled, r.NotSettled)
	}
	w = completeWorld(4, "nginx:1.0")
	w.pods = w.pods[1:]
	if r := check(t, w); r.Settled || !strings.Contains(r.NotSettled, "active 3") {
		t.Errorf("a missing pod: settled %v (%s), want not settled with 3 active pods", r.Settled, r.NotSettled)
	}
}

// A settled state kubedeploy would change: a complete Deployment whose Available condition says otherwise,
// and a revisionHistoryLimit of 0 with an old ReplicaSet left: one condition field, one deletion.
func TestDivergencesNameObjectFieldAndValues(t *testing.T) {
	w := completeWorld(4, "nginx:1.0", "nginx:1.1")
	w.d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	w.d.Status.Conditions[0].Status = v1.ConditionFalse
	r := check(t, w)
	if !r.Settled {
		t.Fatalf("not settled: %s", r.NotSettled)
	}
	want := []string{
		`condition: Deployment default/web status.conditions[Available].lastTransitionTime: live "2026-11-25T11:00:00Z", kubedeploy "2026-11-25T12:00:00Z"`,
		`condition: Deployment default/web status.conditions[Available].lastUpdateTime: live "2026-11-25T11:00:00Z", kubedeploy "2026-11-25T12:00:00Z"`,
		`condition: Deployment default/web status.conditions[Available].status: live "False", kubedeploy "True"`,
		`delete_replicaset: ReplicaSet default/web-1: deleted`,
	}
	var got []string
	for _, d := range r.Divergences {
		got = append(got, d.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("divergences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The syncs' writes are recorded and answered, never sent: a check that makes writes (a status update, a
// ReplicaSet deletion) sends the API server no request but reads, and checks again alike (the record is the
// check's own).
func TestChecksNeverSendWrites(t *testing.T) {
	var mu sync.Mutex
	var methods []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer server.Close()
	w := completeWorld(4, "nginx:1.0", "nginx:1.1")
	w.d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	w.d.Status.Conditions[0].Status = v1.ConditionFalse
	c := checker(t, w, server.URL)
	for i := range 2 {
		r, err := c.Check(context.Background(), cache.ObjectName{Namespace: "default", Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Divergences) != 4 {
			t.Errorf("check %d: divergences:%s; want the 4 of TestDivergencesNameObjectFieldAndValues", i, describe(r.Divergences))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range methods {
		if m != http.MethodGet {
			t.Errorf("requests sent: %v; want reads alone", methods)
			break
		}
	}
}

// EX-1 at a fixed point: a rollout upstream completed past the partition is where kubedeploy holds too (it
// never rolls pods back), so the shadow check finds no size to write; the rollout itself is what breaks the
// partition, which CheckBounds sees. The one write is EX-0's: the old ReplicaSet, which upstream never
// touches, gets the Deployment's policy annotation, so that `kubectl rollout undo` to it keeps the policy.
func TestCompletedRolloutPastThePartitionIsAFixedPoint(t *testing.T) {
	w := completeWorld(4, "nginx:1.0", "nginx:1.1")
	w.d.Annotations["kubedeploy.io/rollout-partition"] = "2"
	w.rss[1].Annotations["kubedeploy.io/rollout-partition"] = "2" // upstream copies the Deployment's annotations
	r := check(t, w)
	if !r.Settled || len(r.Divergences) != 1 {
		t.Fatalf("settled %v (%s), divergences:%s; want settled, one", r.Settled, r.NotSettled, describe(r.Divergences))
	}
	if got := describe(r.Divergences); !strings.Contains(got, "metadata.annotations[kubedeploy.io/rollout-partition]: live <none>, kubedeploy \"2\"") {
		t.Errorf("divergence:%s; want the policy annotation on the old ReplicaSet", got)
	}
}
