package controllertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// EventBuffer is how many events Recorder holds before it blocks.
const EventBuffer = 100

// Fixture is what a controller's sync test needs besides the controller: a
// fake clientset, an informer factory over it whose indexers are filled by
// hand (no informer is started), an event recorder and a fake clock. A
// controller package's fixture embeds it, builds its controller from these
// fields and adds its own helpers.
type Fixture struct {
	T *testing.T
	// Ctx carries the test's logger (ktesting).
	Ctx      context.Context
	Client   *fake.Clientset
	Factory  informers.SharedInformerFactory
	Recorder *record.FakeRecorder
	Clock    *clocktesting.FakeClock
}

// New returns a Fixture whose clientset and informer indexers both hold objs
// (Deployments, ReplicaSets, pods and nodes; anything else fails the test), with
// Clock at now.
func New(t *testing.T, now time.Time, objs ...runtime.Object) *Fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	f := &Fixture{
		T:        t,
		Ctx:      ctx,
		Client:   client,
		Factory:  informers.NewSharedInformerFactory(client, 0),
		Recorder: record.NewFakeRecorder(EventBuffer),
		Clock:    clocktesting.NewFakeClock(now),
	}
	for _, o := range objs {
		f.AddToCache(o)
	}
	return f
}

// AddToCache puts obj into (or replaces it in) its informer's indexer, as
// the informer would on a watch event. obj must be a Deployment, a
// ReplicaSet, a pod or a node.
func (f *Fixture) AddToCache(obj runtime.Object) {
	f.T.Helper()
	var idx cache.Indexer
	switch obj.(type) {
	case *appsv1.Deployment:
		idx = f.Factory.Apps().V1().Deployments().Informer().GetIndexer()
	case *appsv1.ReplicaSet:
		idx = f.Factory.Apps().V1().ReplicaSets().Informer().GetIndexer()
	case *v1.Pod:
		idx = f.Factory.Core().V1().Pods().Informer().GetIndexer()
	case *v1.Node:
		idx = f.Factory.Core().V1().Nodes().Informer().GetIndexer()
	default:
		f.T.Fatalf("AddToCache: unexpected object %T", obj)
	}
	if err := idx.Update(obj); err != nil {
		f.T.Fatalf("AddToCache: %v", err)
	}
}

// Fail makes the fake API server answer every verb request on resource
// (any subresource) with err instead of applying it.
func (f *Fixture) Fail(verb, resource string, err error) {
	f.FailEach(verb, resource, func(int) error { return err })
}

// FailEach is Fail with the error for the n-th such request (from 1) given
// by errFor.
func (f *Fixture) FailEach(verb, resource string, errFor func(n int) error) {
	n := 0
	f.Client.PrependReactor(verb, resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		n++
		return true, nil, errFor(n)
	})
}

// Events drains the recorded events and returns them in order.
func (f *Fixture) Events() []string {
	var out []string
	for {
		select {
		case e := <-f.Recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Count returns the number of recorded client actions with verb on
// resource and subresource ("" for the main resource), reads included.
func (f *Fixture) Count(verb, resource, subresource string) int {
	n := 0
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

// Actions counts the recorded client actions, reads included, keyed "verb
// resource" or "verb resource/subresource".
func (f *Fixture) Actions() map[string]int {
	out := map[string]int{}
	for _, a := range f.Client.Actions() {
		out[actionKey(a)]++
	}
	return out
}

// Writes is Actions without the reads (get, list and watch).
func (f *Fixture) Writes() map[string]int {
	out := map[string]int{}
	for _, a := range f.Client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		out[actionKey(a)]++
	}
	return out
}

func actionKey(a clienttesting.Action) string {
	k := a.GetVerb() + " " + a.GetResource().Resource
	if s := a.GetSubresource(); s != "" {
		k += "/" + s
	}
	return k
}

// ExpectCounts fails the test for each key of want (as in Actions) whose
// count differs; actions it does not name are not checked.
func (f *Fixture) ExpectCounts(want map[string]int) {
	f.T.Helper()
	got := f.Actions()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			f.T.Errorf("%s = %d, want %d", k, got[k], want[k])
		}
	}
}

// ExpectWrites fails the test unless Writes is exactly want (nil or empty:
// no writes at all).
func (f *Fixture) ExpectWrites(want map[string]int) {
	f.T.Helper()
	got := f.Writes()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.T.Errorf("writes = %v, want %v", got, want)
	}
}
