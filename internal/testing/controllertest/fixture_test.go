package controllertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"}
}

// TestNewFillsClientAndCaches: the objects given to New are in the
// clientset and in their informers' indexers; AddToCache replaces.
func TestNewFillsClientAndCaches(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: meta("d")}
	rs := &appsv1.ReplicaSet{ObjectMeta: meta("rs")}
	pod := &v1.Pod{ObjectMeta: meta("p")}
	f := New(t, now, d, rs, pod)
	if !f.Clock.Now().Equal(now) {
		t.Errorf("clock at %v, want %v", f.Clock.Now(), now)
	}
	if _, err := f.Client.AppsV1().Deployments("ns").Get(f.Ctx, "d", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment not in the clientset: %v", err)
	}
	for name, idx := range map[string]interface{ ListKeys() []string }{
		"deployments": f.Factory.Apps().V1().Deployments().Informer().GetIndexer(),
		"replicasets": f.Factory.Apps().V1().ReplicaSets().Informer().GetIndexer(),
		"pods":        f.Factory.Core().V1().Pods().Informer().GetIndexer(),
	} {
		if keys := idx.ListKeys(); len(keys) != 1 {
			t.Errorf("%s indexer keys = %v, want one", name, keys)
		}
	}
	changed := rs.DeepCopy()
	changed.ResourceVersion = "8"
	f.AddToCache(changed)
	got, _, _ := f.Factory.Apps().V1().ReplicaSets().Informer().GetIndexer().GetByKey("ns/rs")
	if got.(*appsv1.ReplicaSet).ResourceVersion != "8" {
		t.Errorf("AddToCache did not replace the cached ReplicaSet: %+v", got)
	}
}

// TestActionCounts: Count and Actions include reads, Writes leaves them
// out, and the Expect helpers compare against them.
func TestActionCounts(t *testing.T) {
	f := New(t, now, &appsv1.ReplicaSet{ObjectMeta: meta("rs")})
	rss := f.Client.AppsV1().ReplicaSets("ns")
	rs, err := rss.Get(f.Ctx, "rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rss.UpdateStatus(f.Ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Pods("ns").Create(f.Ctx, &v1.Pod{ObjectMeta: meta("p")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := f.Count("get", "replicasets", ""); n != 1 {
		t.Errorf("Count(get replicasets) = %d, want 1", n)
	}
	if n := f.Count("update", "replicasets", ""); n != 0 {
		t.Errorf("Count(update replicasets) = %d, want 0: the write was to the status subresource", n)
	}
	wantActions := map[string]int{"get replicasets": 1, "update replicasets/status": 1, "create pods": 1}
	if got := f.Actions(); fmt.Sprint(got) != fmt.Sprint(wantActions) {
		t.Errorf("Actions = %v, want %v", got, wantActions)
	}
	wantWrites := map[string]int{"update replicasets/status": 1, "create pods": 1}
	if got := f.Writes(); fmt.Sprint(got) != fmt.Sprint(wantWrites) {
		t.Errorf("Writes = %v, want %v", got, wantWrites)
	}
	f.ExpectWrites(wantWrites)
	f.ExpectCounts(map[string]int{"get replicasets": 1, "delete pods": 0})
}

// TestFail: requests on a failed resource get the given errors in order
// and change nothing; other verbs still work.
func TestFail(t *testing.T) {
	f := New(t, now)
	quota := errors.New("exceeded quota")
	f.Fail("create", "pods", quota)
	pods := f.Client.CoreV1().Pods("ns")
	if _, err := pods.Create(f.Ctx, &v1.Pod{ObjectMeta: meta("p")}, metav1.CreateOptions{}); !errors.Is(err, quota) {
		t.Errorf("create err = %v, want %v", err, quota)
	}
	if l, err := pods.List(f.Ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("list = %v, %v; want no pods and no error", l, err)
	}
	var got []string
	f.FailEach("delete", "pods", func(n int) error { return fmt.Errorf("delete %d", n) })
	for range 2 {
		got = append(got, fmt.Sprint(pods.Delete(f.Ctx, "p", metav1.DeleteOptions{})))
	}
	if want := []string{"delete 1", "delete 2"}; !slices.Equal(got, want) {
		t.Errorf("delete errors = %q, want %q", got, want)
	}
}

// TestEvents drains the recorder in order.
func TestEvents(t *testing.T) {
	f := New(t, now)
	f.Recorder.Event(&v1.Pod{}, v1.EventTypeNormal, "A", "first")
	f.Recorder.Event(&v1.Pod{}, v1.EventTypeWarning, "B", "second")
	if got, want := f.Events(), []string{"Normal A first", "Warning B second"}; !slices.Equal(got, want) {
		t.Errorf("Events = %q, want %q", got, want)
	}
	if got := f.Events(); len(got) != 0 {
		t.Errorf("Events after draining = %q, want none", got)
	}
}
