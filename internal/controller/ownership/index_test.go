package ownership

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// TestSelectedByMatchesANamespaceScan: SelectedBy through the pod-template-hash index returns exactly the pods a
// full scan of the namespace with the selector returns (RS-14's related pods), for selectors that pin the hash
// and for ones that do not, whoever owns the pods, and never pods of another namespace.
func TestSelectedByMatchesANamespaceScan(t *testing.T) {
	const key = "pod-template-hash"
	indexed := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	inf := &fakeIndexInformer{indexer: indexed}
	if err := AddLabelIndex(inf, key); err != nil {
		t.Fatal(err)
	}
	if err := AddLabelIndex(inf, key); err != nil {
		t.Fatalf("adding the index twice: %v", err)
	}
	addSelectionPods(t, key, indexed, plain)
	for _, ls := range []*metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "app-1", key: "h1"}},
		{MatchLabels: map[string]string{key: "h0"}},
		{MatchLabels: map[string]string{key: "h0"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front"}}}},
		{MatchLabels: map[string]string{"app": "app-2"}},
		{MatchLabels: map[string]string{key: "missing"}},
	} {
		sel, ok := Selector(ls)
		if !ok {
			t.Fatalf("selector %v invalid", ls)
		}
		for _, ns := range []string{"a", "b"} {
			var want []*v1.Pod
			if err := cache.ListAllByNamespace(plain, ns, sel, func(obj any) { want = append(want, obj.(*v1.Pod)) }); err != nil {
				t.Fatal(err)
			}
			for name, ix := range map[string]cache.Indexer{"indexed": indexed, "no index": plain} {
				got, err := SelectedBy[*v1.Pod](ix, ns, ls, sel, key)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(podNames(got), podNames(want)) {
					t.Errorf("%s, %s, selector %v: got %v, want %v", name, ns, labels.Selector(sel), podNames(got), podNames(want))
				}
			}
		}
	}
}

// addSelectionPods adds the same 60 pods to each of indexers: in namespaces
// "a" and "b", of three apps, three quarters carrying a key (the hash) label
// of two values, a fifth labelled tier=front, a seventh owned by another
// controller.
func addSelectionPods(t *testing.T, key string, indexers ...cache.Indexer) {
	t.Helper()
	for i := range 60 {
		l := map[string]string{"app": fmt.Sprintf("app-%d", i%3)}
		if i%4 != 0 { // a quarter of the pods carry no hash
			l[key] = fmt.Sprintf("h%d", i%2)
		}
		if i%5 == 0 {
			l["tier"] = "front"
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: []string{"a", "b"}[i%2], Name: fmt.Sprintf("p%d", i), Labels: l}}
		if i%7 == 0 { // owned by someone else: still selected
			pod.OwnerReferences = []metav1.OwnerReference{{UID: "other", Controller: new(true)}}
		}
		for _, ix := range indexers {
			if err := ix.Add(pod); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// podNames returns the namespace/name of pods, sorted.
func podNames(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// fakeIndexInformer is the part of a SharedIndexInformer AddLabelIndex uses.
type fakeIndexInformer struct {
	cache.SharedIndexInformer
	indexer cache.Indexer
}

func (f *fakeIndexInformer) GetIndexer() cache.Indexer           { return f.indexer }
func (f *fakeIndexInformer) AddIndexers(ix cache.Indexers) error { return f.indexer.AddIndexers(ix) }
