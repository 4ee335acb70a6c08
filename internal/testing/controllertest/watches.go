package controllertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Watches records which resources of a fake clientset informers watch. client-go's fake clientset drops what
// changes between an informer's list and its watch (its tracker replays nothing by resourceVersion), so a test
// that changes objects after the informers started waits first, with Wait, until every watch is there.
type Watches struct {
	mu       sync.Mutex
	watching map[string]bool
}

// RecordWatches makes client's watches go through the returned Watches; call it before any informer starts.
func RecordWatches(client *fake.Clientset) *Watches {
	w := &Watches{watching: map[string]bool{}}
	client.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		watcher, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watching[a.GetResource().Resource] = true
		return true, watcher, err
	})
	return w
}

// Wait fails t unless every one of resources (plural names: "pods", "replicasets") is watched within 10 s.
func (w *Watches) Wait(t *testing.T, resources ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, r := range resources {
			if !w.watching[r] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for watches of %v: %v", resources, err)
	}
}
