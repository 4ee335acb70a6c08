package shard

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Scope is the namespaces whose hashes fall in Ranges (SH-4).
type Scope struct {
	Ranges []Range
	// ServerSide sets ListOptions.ShardSelector on every list and watch, for an API server that filters
	// (ShardedListAndWatch; Probe). Client-side filtering happens either way.
	ServerSide bool
}

// Contains reports whether namespace is in the scope.
func (s Scope) Contains(namespace string) bool {
	h := Hash(namespace)
	for _, r := range s.Ranges {
		if h >= r.Start && h <= r.Last {
			return true
		}
	}
	return false
}

// Selector is the scope's ListOptions.ShardSelector (Selector).
func (s Scope) Selector() string { return Selector(s.Ranges...) }

// ListWatch returns lw restricted to the scope (SH-4): lists and watches carry the shard selector when
// ServerSide, and objects of other namespaces are dropped from every list and every watch event (but
// bookmarks and errors) before an informer sees them, whatever the server did. It keeps lw's answer to
// client-go's watch-list opt-out.
func (s Scope) ListWatch(lw cache.ListerWatcher) cache.ListerWatcher {
	l := scopedListWatch{inner: cache.ToListerWatcherWithContext(lw), scope: s}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: l.list, WatchFuncWithContext: l.watch}, lw)
}

type scopedListWatch struct {
	inner cache.ListerWatcherWithContext
	scope Scope
}

func (l scopedListWatch) tweak(o *metav1.ListOptions) {
	if l.scope.ServerSide {
		o.ShardSelector = l.scope.Selector()
	}
}

// list lists through the inner ListerWatcher and keeps the scope's items.
func (l scopedListWatch) list(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	l.tweak(&o)
	list, err := l.inner.ListWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("filtering a list by shard: %w", err)
	}
	kept := items[:0]
	for _, item := range items {
		if l.keep(item) {
			kept = append(kept, item)
		}
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, fmt.Errorf("filtering a list by shard: %w", err)
	}
	return list, nil
}

// watch watches through the inner ListerWatcher and passes the scope's events.
func (l scopedListWatch) watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	l.tweak(&o)
	w, err := l.inner.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Bookmark, watch.Error:
			return e, true
		}
		return e, l.keep(e.Object)
	}), nil
}

func (l scopedListWatch) keep(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && l.scope.Contains(m.GetNamespace())
}

// Probe reports whether the API server filters lists by shard (ShardedListAndWatch on): it lists one pod with
// scope's selector and compares the selector the server echoes in the list's shardInfo; a server with the
// gate off, or older, echoes nothing and ignores the selector (SH-4). The error is the API server's.
func Probe(ctx context.Context, client kubernetes.Interface, scope Scope) (bool, error) {
	sel := scope.Selector()
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: sel})
	if err != nil {
		return false, fmt.Errorf("probing for sharded list and watch: %w", err)
	}
	return list.ShardInfo != nil && list.ShardInfo.Selector == sel, nil
}
