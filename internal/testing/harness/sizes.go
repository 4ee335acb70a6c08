package harness

import (
	"context"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// SizeLog records, from a watch of one namespace's ReplicaSets, each
// ReplicaSet's spec.replicas every time it changes: a ReplicaSet that
// appears is recorded at its first size, and a repeated size is not recorded
// again. Safe for concurrent use.
type SizeLog struct {
	mu    sync.Mutex
	sizes map[string][]int32
	stop  func()
}

// WatchReplicaSetSizes starts a SizeLog on namespace ns. It records until
// Stop or until ctx ends; it fails t if the watch cannot start.
func WatchReplicaSetSizes(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) *SizeLog {
	t.Helper()
	w, err := client.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching the ReplicaSets of %s: %v", ns, err)
	}
	l := &SizeLog{sizes: map[string][]int32{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok || ev.Type == watch.Deleted || rs.Spec.Replicas == nil {
				continue
			}
			l.mu.Lock()
			s := l.sizes[rs.Name]
			if n := *rs.Spec.Replicas; len(s) == 0 || s[len(s)-1] != n {
				l.sizes[rs.Name] = append(s, n)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// Of returns the sizes recorded for ReplicaSet name so far, oldest first
// (replicas); nil if none.
func (l *SizeLog) Of(name string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes[name])
}

// Stop ends the watch.
func (l *SizeLog) Stop() { l.stop() }
