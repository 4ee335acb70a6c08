package informerunion

import (
	"errors"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
)

// errReadOnly is what the union's indexer answers to writes: only its members' informers write their stores.
var errReadOnly = errors.New("informer union: the indexer is read-only; its members' informers fill their stores")

// indexer is the cache.Indexer of an Informer: reads over its members' stores. A key or a NamespaceIndex value
// names a namespace, and is read from the one member that holds it; other indexes (ControllerIndex: an owner's
// UID) are read from every member, and their answers concatenated. Writes are refused.
type indexer struct{ u *Informer }

func (x *indexer) Add(any) error                      { return errReadOnly }
func (x *indexer) Update(any) error                   { return errReadOnly }
func (x *indexer) Delete(any) error                   { return errReadOnly }
func (x *indexer) Replace([]any, string) error        { return errReadOnly }
func (x *indexer) Resync() error                      { return errReadOnly }
func (x *indexer) Bookmark(string)                    {}
func (x *indexer) AddIndexers(i cache.Indexers) error { return x.u.AddIndexers(i) }

// GetIndexers returns the union's indexers.
func (x *indexer) GetIndexers() cache.Indexers {
	x.u.mu.RLock()
	defer x.u.mu.RUnlock()
	return maps.Clone(x.u.indexers)
}

// List returns every member's objects.
func (x *indexer) List() []any {
	var out []any
	x.u.each(func(m *member) bool { out = append(out, m.inf.GetIndexer().List()...); return true })
	return out
}

// ListKeys returns every member's keys.
func (x *indexer) ListKeys() []string {
	var out []string
	x.u.each(func(m *member) bool { out = append(out, m.inf.GetIndexer().ListKeys()...); return true })
	return out
}

// Get returns the stored object with obj's key (GetByKey).
func (x *indexer) Get(obj any) (any, bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

// GetByKey returns the object with key "namespace/name" from the member holding namespace (a key without a
// namespace is looked for in every member).
func (x *indexer) GetByKey(key string) (any, bool, error) {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	x.u.mu.RLock()
	defer x.u.mu.RUnlock()
	if ns != "" {
		if m := x.u.route(ns); m != nil {
			return m.inf.GetIndexer().GetByKey(key)
		}
		return nil, false, nil
	}
	for _, id := range x.u.ids {
		if obj, ok, err := x.u.members[id].inf.GetIndexer().GetByKey(key); ok || err != nil {
			return obj, ok, err
		}
	}
	return nil, false, nil
}

// Index returns the objects sharing an indexed value with obj, from every member.
func (x *indexer) Index(indexName string, obj any) ([]any, error) {
	return gatherOf(x.u, func(i cache.Indexer) ([]any, error) { return i.Index(indexName, obj) })
}

// ByIndex returns the objects whose indexName index has value: for cache.NamespaceIndex from the member
// holding that namespace, for any other index from every member.
func (x *indexer) ByIndex(indexName, value string) ([]any, error) {
	read := func(i cache.Indexer) ([]any, error) { return i.ByIndex(indexName, value) }
	if indexName == cache.NamespaceIndex {
		return inNamespaceOf(x.u, value, read)
	}
	return gatherOf(x.u, read)
}

// IndexKeys is ByIndex's keys.
func (x *indexer) IndexKeys(indexName, value string) ([]string, error) {
	read := func(i cache.Indexer) ([]string, error) { return i.IndexKeys(indexName, value) }
	if indexName == cache.NamespaceIndex {
		return inNamespaceOf(x.u, value, read)
	}
	return gatherOf(x.u, read)
}

// ListIndexFuncValues returns the values of indexName over every member, each once.
func (x *indexer) ListIndexFuncValues(indexName string) []string {
	seen := map[string]bool{}
	x.u.each(func(m *member) bool {
		for _, v := range m.inf.GetIndexer().ListIndexFuncValues(indexName) {
			seen[v] = true
		}
		return true
	})
	return slices.Sorted(maps.Keys(seen))
}

// LastStoreSyncResourceVersion is the oldest of the members' stores' (every member's store has applied the
// changes up to it; "" with no member).
func (x *indexer) LastStoreSyncResourceVersion() string {
	var rvs []string
	x.u.each(func(m *member) bool {
		rvs = append(rvs, m.inf.GetIndexer().LastStoreSyncResourceVersion())
		return true
	})
	return oldest(rvs)
}

// LastStoreSyncResourceVersionIn is the resourceVersion of the newest change the store holding namespace's
// objects has applied, that informer's last synced one when its store reports none, "" when no member holds
// namespace (expectations.NamespacedVersions: IM-4's guard compares a key's writes with its own bucket's
// store).
func (x *indexer) LastStoreSyncResourceVersionIn(namespace string) string {
	x.u.mu.RLock()
	defer x.u.mu.RUnlock()
	m := x.u.route(namespace)
	if m == nil {
		return ""
	}
	if rv := m.inf.GetIndexer().LastStoreSyncResourceVersion(); rv != "" {
		return rv
	}
	return m.inf.LastSyncResourceVersion()
}

// gatherOf concatenates read of every member's indexer, in id order; the first error is returned.
func gatherOf[T any](u *Informer, read func(cache.Indexer) ([]T, error)) ([]T, error) {
	var out []T
	var err error
	u.each(func(m *member) bool {
		var got []T
		got, err = read(m.inf.GetIndexer())
		out = append(out, got...)
		return err == nil
	})
	return out, err
}

// inNamespaceOf is read of the indexer of the member holding namespace (none: nothing).
func inNamespaceOf[T any](u *Informer, namespace string, read func(cache.Indexer) ([]T, error)) ([]T, error) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if m := u.route(namespace); m != nil {
		return read(m.inf.GetIndexer())
	}
	return nil, nil
}

// oldest returns the oldest of rvs: the smallest, compared as resourceVersions, "" when rvs is empty or one of
// them is "" (a member that has synced nothing). resourceVersions that do not compare are taken as they come.
func oldest(rvs []string) string {
	if len(rvs) == 0 || slices.Contains(rvs, "") {
		return ""
	}
	least := rvs[0]
	for _, rv := range rvs[1:] {
		if cmp, err := resourceversion.CompareResourceVersion(rv, least); err == nil && cmp < 0 {
			least = rv
		}
	}
	return least
}
