package rolloutmetrics

import (
	"slices"
	"sync"
)

// Attached is the sources a scrape-time collector reads: one per controller set that attached it (in sharded
// mode a process runs several, over disjoint namespaces), in the order they were attached. The zero value is
// empty and ready to use; it is safe for concurrent use.
//
// A collector over several sources sends each series once: when two sources report the same series, the one
// attached first wins and the other's value is dropped (Prometheus rejects a scrape that holds a series twice).
// Sources over disjoint namespaces never report the same series.
type Attached[T any] struct {
	mu      sync.Mutex
	sources []*T
}

// Add attaches x and returns the function that detaches it again. Calling detach more than once is harmless: only
// the first call detaches, and only the x this Add attached, even if x was attached more than once.
func (a *Attached[T]) Add(x *T) (detach func()) {
	a.mu.Lock()
	a.sources = append(a.sources, x)
	a.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { a.remove(x) }) }
}

// remove drops one occurrence of x.
func (a *Attached[T]) remove(x *T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := slices.Index(a.sources, x); i >= 0 {
		a.sources = slices.Delete(a.sources, i, i+1)
	}
}

// All returns the attached sources, first attached first, as a copy the caller may keep.
func (a *Attached[T]) All() []*T {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sources)
}
