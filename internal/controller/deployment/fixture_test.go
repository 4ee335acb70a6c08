package deployment

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// fixture is a Deployment controller over controllertest's fake clientset
// and hand-filled informer indexers.
type fixture struct {
	*controllertest.Fixture
	c *Controller
	// keys are the work-queue keys drained so far (see enqueued).
	keys []cache.ObjectName
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t, baseTime.Add(24*time.Hour), objs...)}
	c, err := New(f.Ctx, Config{
		Client:      apiclient.New(f.Client, nil),
		Deployments: f.Factory.Apps().V1().Deployments(),
		ReplicaSets: f.Factory.Apps().V1().ReplicaSets(),
		Pods:        f.Factory.Core().V1().Pods(),
		Recorder:    f.Recorder,
		Clock:       f.Clock,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// The handlers' keys go to a queue whose "sync" only records them.
	c.runner = runner.New(Name, func(_ context.Context, key cache.ObjectName) (runner.Result, error) {
		f.keys = append(f.keys, key)
		return runner.Result{}, nil
	})
	f.c = c
	return f
}

// enqueued drains the controller's work queue and returns the keys that
// were in it, in order, each once (the queue merges repeated adds).
func (f *fixture) enqueued() []cache.ObjectName {
	for f.c.runner.Len() > 0 {
		f.c.runner.ProcessNextItem(f.Ctx)
	}
	keys := f.keys
	f.keys = nil
	return keys
}

// observe copies the API server's current Deployments and ReplicaSets into
// the caches, as informers would.
func (f *fixture) observe() {
	f.T.Helper()
	ds, err := f.Client.AppsV1().Deployments("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	for i := range ds.Items {
		f.AddToCache(&ds.Items[i])
	}
	rss, err := f.Client.AppsV1().ReplicaSets("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	for i := range rss.Items {
		f.AddToCache(&rss.Items[i])
	}
}

// setRSStatus writes an RS status in the fake API server (as the RS
// controller would) and observes it.
func (f *fixture) setRSStatus(name string, replicas, available int32) {
	f.T.Helper()
	rs, err := f.Client.AppsV1().ReplicaSets("ns").Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	withStatus(rs, replicas, available)
	if _, err := f.Client.AppsV1().ReplicaSets("ns").UpdateStatus(f.Ctx, rs, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
	f.observe()
}

// sync runs one syncDeployment for ns/nginx after clearing recorded actions.
func (f *fixture) sync() (runner.Result, error) {
	f.Client.ClearActions()
	return f.c.syncDeployment(f.Ctx, cache.ObjectName{Namespace: "ns", Name: "nginx"})
}

func (f *fixture) deployment() *appsv1.Deployment {
	f.T.Helper()
	d, err := f.Client.AppsV1().Deployments("ns").Get(f.Ctx, "nginx", metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return d
}

// replicaSets returns the API server's ReplicaSets sorted by name.
func (f *fixture) replicaSets() []appsv1.ReplicaSet {
	f.T.Helper()
	l, err := f.Client.AppsV1().ReplicaSets("ns").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (f *fixture) rs(name string) *appsv1.ReplicaSet {
	f.T.Helper()
	rs, err := f.Client.AppsV1().ReplicaSets("ns").Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return rs
}

// enforceOptimisticConcurrency makes the fake API server behave like a real
// one for updates: a stale resourceVersion is a Conflict, and every update
// and patch bumps the resourceVersion. Used to prove IM-2 (no
// self-inflicted 409s).
func (f *fixture) enforceOptimisticConcurrency() *int {
	conflicts := 0
	f.Client.PrependReactor("patch", "*", func(action core.Action) (bool, runtime.Object, error) {
		// Bump the stored resourceVersion; the default reactor then patches it.
		stored, err := f.Client.Tracker().Get(action.GetResource(), action.GetNamespace(), action.(core.PatchAction).GetName())
		if err != nil {
			return false, nil, nil
		}
		sm, _ := meta.Accessor(stored)
		rv, _ := strconv.Atoi(sm.GetResourceVersion())
		sm.SetResourceVersion(strconv.Itoa(rv + 1))
		if err := f.Client.Tracker().Update(action.GetResource(), stored, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	f.Client.PrependReactor("update", "*", func(action core.Action) (bool, runtime.Object, error) {
		obj := action.(core.UpdateAction).GetObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		stored, err := f.Client.Tracker().Get(action.GetResource(), action.GetNamespace(), m.GetName())
		if err != nil {
			return false, nil, nil
		}
		sm, _ := meta.Accessor(stored)
		if sm.GetResourceVersion() != m.GetResourceVersion() {
			conflicts++
			return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), m.GetName(), fmt.Errorf("stale resourceVersion %s", m.GetResourceVersion()))
		}
		rv, _ := strconv.Atoi(m.GetResourceVersion())
		m.SetResourceVersion(strconv.Itoa(rv + 1))
		return false, nil, nil
	})
	return &conflicts
}

type runtimeObject = runtime.Object

var errQuota = apierrors.NewForbidden(appsv1.Resource("replicasets"), "x", fmt.Errorf("exceeded quota"))

// baseTime is the fixed creation time objects in tests start from.
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newDeployment returns a defaulted RollingUpdate Deployment "nginx" in
// namespace "ns" with surge/unavailable as given.
func newDeployment(replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nginx", Namespace: "ns", UID: "d-uid", Generation: 1, ResourceVersion: "100",
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: podTemplate("nginx:1.14.2"),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// newRecreateDeployment returns newDeployment's "nginx" with the Recreate
// strategy instead, so without rollingUpdate (VA-7).
func newRecreateDeployment(replicas int32) *appsv1.Deployment {
	d := newDeployment(replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// pct25 returns maxSurge and maxUnavailable at their VA-1 defaults, 25%.
func pct25() (intstr.IntOrString, intstr.IntOrString) {
	return intstr.FromString("25%"), intstr.FromString("25%")
}

func podTemplate(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: image}}},
	}
}

// newRS returns a ReplicaSet owned by d with the given template image, size,
// age (minutes after baseTime) and annotations.
func newRS(d *appsv1.Deployment, name, image string, size int32, minute int, annotations map[string]string) *appsv1.ReplicaSet {
	tmpl := podTemplate(image)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.Namespace, UID: types.UID(name + "-uid"), ResourceVersion: "10",
			Labels:            map[string]string{"app": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: name},
			Annotations:       annotations,
			CreationTimestamp: metav1.NewTime(baseTime.Add(time.Duration(minute) * time.Minute)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(size),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: name}},
			Template: tmpl,
		},
	}
}

// startRollout changes d's template to nginx:2 with d at revision 1 and
// returns d's revision-1 ReplicaSet "nginx-a" (nginx:1): at d's replicas,
// all available, annotated desired = d's replicas and max = maxReplicas.
func startRollout(d *appsv1.Deployment, maxReplicas int32) *appsv1.ReplicaSet {
	n := *d.Spec.Replicas
	d.Spec.Template = podTemplate("nginx:2")
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "1"}
	return withStatus(newRS(d, "nginx-a", "nginx:1", n, 0, sizeAnnotations(n, maxReplicas, 1)), n, n)
}

// withStatus sets the ReplicaSet's status counts (replicas = ready = available unless given).
func withStatus(rs *appsv1.ReplicaSet, replicas, available int32) *appsv1.ReplicaSet {
	rs.Status.Replicas = replicas
	rs.Status.ReadyReplicas = available
	rs.Status.AvailableReplicas = available
	rs.Status.ObservedGeneration = 1
	rs.Status.TerminatingReplicas = ptr.To[int32](0)
	return rs
}

// sizeAnnotations returns desired/max (and optionally revision) annotations.
func sizeAnnotations(desired, maxReplicas int32, rev int) map[string]string {
	m := map[string]string{
		rolloutstate.DesiredReplicasAnnotation: strconv.Itoa(int(desired)),
		rolloutstate.MaxReplicasAnnotation:     strconv.Itoa(int(maxReplicas)),
	}
	if rev > 0 {
		m[rolloutstate.RevisionAnnotation] = strconv.Itoa(rev)
	}
	return m
}
