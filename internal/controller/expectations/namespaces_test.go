package expectations

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// inA is a bucket of namespaces: those starting with "a-".
func inA(ns string) bool { return strings.HasPrefix(ns, "a-") }

// TestForgetNamespaces: both guards forget the records of the keys of the namespaces given, and only those
// (SH-3: a bucket taken again starts with empty expectations).
func TestForgetNamespaces(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	tr := NewTracker("test", clocktesting.NewFakeClock(metav1.Now().Time), 0)
	ryw := NewReadYourWrites("test", nil, 0, map[string]Cache{"pods": (&fakeCache{observed: "1"}).cache()})
	for _, key := range []string{"a-1/rs", "a-2/rs", "b-1/rs"} {
		tr.ExpectCreations(logger, key, 2)
		ryw.Written(key, "pods", &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10"}})
	}
	if n := tr.ForgetNamespaces(inA); n != 2 {
		t.Errorf("Tracker forgot %d records, want 2", n)
	}
	if n := ryw.ForgetNamespaces(inA); n != 2 {
		t.Errorf("ReadYourWrites forgot %d records, want 2", n)
	}
	for key, want := range map[string]bool{"a-1/rs": false, "a-2/rs": false, "b-1/rs": true} {
		if _, _, exists := tr.Pending(key); exists != want {
			t.Errorf("Tracker record of %s kept = %v, want %v", key, exists, want)
		}
		if got := ryw.Pending(key); got != want {
			t.Errorf("ReadYourWrites record of %s kept = %v, want %v", key, got, want)
		}
	}
}

// namespacedIndexer is an indexer whose stores apply changes per namespace (NamespacedVersions).
type namespacedIndexer struct {
	cache.Indexer
	versions map[string]string
}

func (n namespacedIndexer) LastStoreSyncResourceVersionIn(namespace string) string {
	return n.versions[namespace]
}

// namespacedInformer is an informer whose GetIndexer is a namespacedIndexer.
type namespacedInformer struct {
	cache.SharedIndexInformer
	indexer namespacedIndexer
}

func (n namespacedInformer) GetIndexer() cache.Indexer { return n.indexer }

// TestInformerCacheReadsEachNamespacesStore: an informer kept per group of namespaces (sharded mode's union
// informer, SH-9) is read per namespace, so that a key's writes wait for their own store, not for the
// slowest or the fastest (IM-4).
func TestInformerCacheReadsEachNamespacesStore(t *testing.T) {
	inf := namespacedInformer{indexer: namespacedIndexer{
		Indexer:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		versions: map[string]string{"a-1": "100", "b-1": "50"},
	}}
	logger, _ := ktesting.NewTestContext(t)
	ryw := NewReadYourWrites("test", nil, 0, map[string]Cache{"pods": InformerCache(inf)})
	cases := []struct {
		key, written string
		want         Freshness
	}{
		{key: "a-1/rs", written: "90", want: Fresh},
		{key: "b-1/rs", written: "90", want: Behind},
		{key: "b-1/other", written: "50", want: Fresh},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			ryw.Written(tc.key, "pods", &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: tc.written}})
			if got := ryw.Check(logger, tc.key); got != tc.want {
				t.Errorf("Check(%s) after a write at %s = %v, want %v", tc.key, tc.written, got, tc.want)
			}
		})
	}
}
