package replicaset

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// fixture is a controller over a fake clientset whose informer indexers are
// filled by hand (no informer is started).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *Controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	nextRV   int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100),
		clock: clocktesting.NewFakeClock(testNow), nextRV: 100}
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	c, err := New(ctx, Config{
		Client:      f.client,
		ReplicaSets: f.factory.Apps().V1().ReplicaSets(),
		Pods:        f.factory.Core().V1().Pods(),
		Recorder:    f.recorder,
		Clock:       f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	for _, o := range objs {
		f.addToCache(o)
	}
	// The fake tracker neither generates names nor sets resourceVersions;
	// do both for created pods like the API server would.
	f.client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
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

func (f *fixture) addToCache(o runtime.Object) {
	var err error
	switch o := o.(type) {
	case *appsv1.ReplicaSet:
		err = f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
	case *v1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync() (runner.Result, error) {
	return f.c.sync(f.ctx, cache.ObjectName{Namespace: "ns", Name: "rs"})
}

// count returns the number of recorded actions with verb on resource
// (and subresource, "" for the main resource).
func (f *fixture) count(verb, resource, subresource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func (f *fixture) writes() int {
	n := 0
	for _, a := range f.client.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			n++
		}
	}
	return n
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) pods() []v1.Pod {
	list, err := f.client.CoreV1().Pods("ns").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func (f *fixture) rsStatus() appsv1.ReplicaSetStatus {
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(f.ctx, "rs", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return rs.Status
}

func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
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

func podNames(pods []v1.Pod) string {
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = pods[i].Name
	}
	return strings.Join(names, ",")
}

func klogFor(f *fixture) klog.Logger { return klog.FromContext(f.ctx) }
