package shard

import (
	"context"
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func pod(ns, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// inAndOut returns a namespace in and one outside the lower half of the hash space.
func inAndOut(t *testing.T) (Scope, string, string) {
	t.Helper()
	scope := Scope{Ranges: []Range{{Start: 0, Last: math.MaxUint64 / 2}}}
	var in, out string
	for _, ns := range []string{"default", "kube-system", "payments", "web", "alpha", "zeta", "monitoring", "ingress"} {
		if scope.Contains(ns) && in == "" {
			in = ns
		} else if !scope.Contains(ns) && out == "" {
			out = ns
		}
	}
	if in == "" || out == "" {
		t.Fatal("no namespace on each side of the split")
	}
	return scope, in, out
}

// TestScopeFiltersClientSide is SH-4's "client-side always": a server that ignores the selector (gate off, or a
// watch served without the watch cache) sends every namespace; the informer's list and watch still see only
// the scope's, bookmarks pass, and the selector goes out only when the server filters.
func TestScopeFiltersClientSide(t *testing.T) {
	for _, serverSide := range []bool{false, true} {
		scope, in, out := inAndOut(t)
		scope.ServerSide = serverSide
		fw := watch.NewFake()
		var sent []string
		lw := scope.ListWatch(&cache.ListWatch{
			ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
				sent = append(sent, o.ShardSelector)
				return &v1.PodList{Items: []v1.Pod{*pod(in, "a"), *pod(out, "b"), *pod(in, "c")}}, nil
			},
			WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
				sent = append(sent, o.ShardSelector)
				return fw, nil
			},
		})
		list, err := cache.ToListerWatcherWithContext(lw).ListWithContext(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if items := list.(*v1.PodList).Items; len(items) != 2 || items[0].Name != "a" || items[1].Name != "c" {
			t.Errorf("serverSide=%v: list kept %v, want pods a and c of %s", serverSide, items, in)
		}
		w, err := cache.ToListerWatcherWithContext(lw).WatchWithContext(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			fw.Add(pod(out, "x"))
			fw.Add(pod(in, "y"))
			fw.Action(watch.Bookmark, pod("", ""))
			fw.Delete(pod(out, "z"))
			fw.Delete(pod(in, "w"))
		}()
		var got []string
		for len(got) < 3 {
			select {
			case e := <-w.ResultChan():
				got = append(got, string(e.Type)+":"+e.Object.(*v1.Pod).Name)
			case <-time.After(10 * time.Second):
				t.Fatalf("serverSide=%v: events %v, waiting for more", serverSide, got)
			}
		}
		w.Stop()
		if want := []string{"ADDED:y", "BOOKMARK:", "DELETED:w"}; !equal(got, want) {
			t.Errorf("serverSide=%v: watch passed %v, want %v", serverSide, got, want)
		}
		want := ""
		if serverSide {
			want = scope.Selector()
		}
		if sent[0] != want || sent[1] != want {
			t.Errorf("serverSide=%v: selectors sent %q, want %q", serverSide, sent, want)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSelectorSyntax pins the selector's wire form, which the API server parses (KEP-5866).
func TestSelectorSyntax(t *testing.T) {
	got := Selector(Range{Start: 0, Last: 1<<63 - 1}, Range{Start: 1 << 63, Last: math.MaxUint64})
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
	if got != want {
		t.Fatalf("Selector = %q\nwant %q", got, want)
	}
}
