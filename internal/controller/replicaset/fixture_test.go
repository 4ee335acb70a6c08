package replicaset

import (
	"sort"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// fixture is a ReplicaSet controller over controllertest's fake clientset
// and hand-filled informer indexers.
type fixture struct {
	*controllertest.Fixture
	c *Controller
	// nextRV is the resourceVersion the fake API server gave the last
	// created pod.
	nextRV int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, objs...)
}

// newSpreadFixture is newFixture with the node informer (EX-4).
func newSpreadFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, func(f *fixture, c *Config) { c.Nodes = f.Factory.Core().V1().Nodes() }, objs...)
}

// newFixtureWith is newFixture with the Config changed by with (if not nil) before New.
func newFixtureWith(t *testing.T, with func(*fixture, *Config), objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t, testNow, objs...), nextRV: 100}
	cfg := Config{
		Client:      apiclient.New(f.Client, nil),
		ReplicaSets: f.Factory.Apps().V1().ReplicaSets(),
		Pods:        f.Factory.Core().V1().Pods(),
		Recorder:    f.Recorder,
		Clock:       f.Clock,
	}
	if with != nil {
		with(f, &cfg)
	}
	c, err := New(f.Ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	// The fake tracker neither generates names nor sets resourceVersions;
	// do both for created pods like the API server would.
	f.Client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		f.nextRV++
		if pod.Name == "" {
			pod.Name = pod.GenerateName + strconv.Itoa(f.nextRV)
		}
		pod.ResourceVersion = strconv.Itoa(f.nextRV)
		return false, nil, nil
	})
	return f
}

func (f *fixture) sync() (runner.Result, error) {
	return f.c.sync(f.Ctx, cache.ObjectName{Namespace: "ns", Name: "rs"})
}

func (f *fixture) pods() []v1.Pod {
	list, err := f.Client.CoreV1().Pods("ns").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func (f *fixture) rsStatus() appsv1.ReplicaSetStatus {
	rs, err := f.Client.AppsV1().ReplicaSets("ns").Get(f.Ctx, "rs", metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return rs.Status
}

func testRS(replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "rs-uid", Generation: 1, ResourceVersion: "10"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

func ownedBy(rs *appsv1.ReplicaSet) podOpt {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}
}

func rv(s string) podOpt { return func(p *v1.Pod) { p.ResourceVersion = s } }

var webLabels = withLabels(map[string]string{"app": "web"})

func klogFor(f *fixture) klog.Logger { return klog.FromContext(f.Ctx) }
