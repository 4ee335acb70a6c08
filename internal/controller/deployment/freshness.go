package deployment

import (
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// writtenRS is one ReplicaSet write the cache has not yet been seen to reflect.
type writtenRS struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
}

// writeTracker implements IM-4 for the Deployment key: it remembers, per
// Deployment, the resourceVersion the API server returned for each
// ReplicaSet we created or updated, and tells a sync whether the ReplicaSet
// cache has caught up. Safe for concurrent use.
type writeTracker struct {
	mu           sync.Mutex
	byDeployment map[cache.ObjectName]map[types.UID]writtenRS
}

func newWriteTracker() *writeTracker {
	return &writeTracker{byDeployment: map[cache.ObjectName]map[types.UID]writtenRS{}}
}

// record remembers rs, as returned by a successful create or update, for the
// Deployment key. Objects without a resourceVersion are not remembered.
func (w *writeTracker) record(key cache.ObjectName, rs *appsv1.ReplicaSet) {
	if rs == nil || rs.ResourceVersion == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.byDeployment[key]
	if m == nil {
		m = map[types.UID]writtenRS{}
		w.byDeployment[key] = m
	}
	m[rs.UID] = writtenRS{namespace: rs.Namespace, name: rs.Name, uid: rs.UID, resourceVersion: rs.ResourceVersion}
}

// forget drops everything remembered for key (the Deployment is gone).
func (w *writeTracker) forget(key cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byDeployment, key)
}

// checkObserved returns an error when a ReplicaSet we wrote for key is in
// the cache with a resourceVersion older than our write (IM-4). Writes the
// cache has caught up with, and ReplicaSets that are gone from it (deleted,
// or replaced by another UID), are forgotten; unparseable resourceVersions
// are forgotten too, since they cannot be compared.
func (w *writeTracker) checkObserved(key cache.ObjectName, get func(namespace, name string) (*appsv1.ReplicaSet, error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, wr := range w.byDeployment[key] {
		cached, err := get(wr.namespace, wr.name)
		if err != nil || cached.UID != wr.uid {
			delete(w.byDeployment[key], uid)
			continue
		}
		cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, wr.resourceVersion)
		if err != nil || cmp >= 0 {
			delete(w.byDeployment[key], uid)
			continue
		}
		return fmt.Errorf("ReplicaSet cache for %s/%s is at resourceVersion %s, older than our write at %s (%w)",
			wr.namespace, wr.name, cached.ResourceVersion, wr.resourceVersion, runner.ErrWaiting)
	}
	if len(w.byDeployment[key]) == 0 {
		delete(w.byDeployment, key)
	}
	return nil
}
