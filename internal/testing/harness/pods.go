package harness

import (
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodCounts are the pods of one PodWatch at one moment, in pods.
type PodCounts struct {
	// Live pods exist, are not terminating and have not finished.
	Live int
	// Present adds the terminating pods that have not finished: what still
	// holds a node's resources.
	Present int
}

// PodWatch counts the pods of one namespace that match a selector at every
// change its own informer sees, and keeps the minimum and maximum since the
// last Reset. Give it a client that does not go through the fault proxy under
// test, so it sees the truth. Safe for concurrent use.
type PodWatch struct {
	namespace string
	selector  labels.Selector
	stop      chan struct{}
	store     cache.Store

	mu         sync.Mutex
	now        PodCounts
	minLive    int
	maxLive    int
	maxPresent int
	changes    int
}

// WatchPods starts a PodWatch on namespace ns for pods matching selector and
// waits for its informer to sync. It stops when t ends.
func WatchPods(t *testing.T, client kubernetes.Interface, ns string, selector labels.Selector) *PodWatch {
	t.Helper()
	w := &PodWatch{namespace: ns, selector: selector, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	startInformer(t, factory, inf, w.stop, "pod watch", w.recount)
	t.Cleanup(w.Stop)
	w.Reset()
	return w
}

// recount recomputes the counts from the store and widens the window.
func (w *PodWatch) recount() {
	var c PodCounts
	for _, obj := range w.store.List() {
		p, ok := obj.(*v1.Pod)
		if !ok || !w.selector.Matches(labels.Set(p.Labels)) || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		c.Present++
		if p.DeletionTimestamp == nil {
			c.Live++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = c
	w.changes++
	w.minLive = min(w.minLive, c.Live)
	w.maxLive = max(w.maxLive, c.Live)
	w.maxPresent = max(w.maxPresent, c.Present)
}

// Reset starts a new window at the current counts.
func (w *PodWatch) Reset() {
	w.recount()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.minLive, w.maxLive, w.maxPresent, w.changes = w.now.Live, w.now.Live, w.now.Present, 0
}

// Namespace returns the namespace watched.
func (w *PodWatch) Namespace() string { return w.namespace }

// Now returns the counts after the last change seen.
func (w *PodWatch) Now() PodCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

// Window returns, since the last Reset, the fewest and most live pods, the
// most present pods and the number of changes seen.
func (w *PodWatch) Window() (minLive, maxLive, maxPresent, changes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minLive, w.maxLive, w.maxPresent, w.changes
}

// String describes the window for failure messages.
func (w *PodWatch) String() string {
	minLive, maxLive, maxPresent, changes := w.Window()
	return fmt.Sprintf("live %d (min %d, max %d), max present %d, %d changes", w.Now().Live, minLive, maxLive, maxPresent, changes)
}

// WaitLive waits up to timeout for exactly n live pods and fails t otherwise.
func (w *PodWatch) WaitLive(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for w.Now().Live != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d live pods: %s", n, w)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the informer; idempotent.
func (w *PodWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}
