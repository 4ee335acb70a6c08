package ownership

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ControllerIndex is the name of the informer index that maps objects to their
// controller. Both controllers add it to the shared pod informer (and the
// Deployment controller to the ReplicaSet informer); AddControllerIndex is
// idempotent so either may add it first.
const ControllerIndex = "kubedeploy.controllerUID"

// ControllerIndexKey is the index value for objects controlled by the owner with uid.
func ControllerIndexKey(uid types.UID) string { return string(uid) }

// OrphanIndexKey is the index value for objects in namespace that have no ControllerRef.
func OrphanIndexKey(namespace string) string { return "orphan/" + namespace }

func controllerIndexFunc(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOf(m); ref != nil {
		return []string{ControllerIndexKey(ref.UID)}, nil
	}
	return []string{OrphanIndexKey(m.GetNamespace())}, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("object of type %T has no metadata", obj)
	}
	return m, nil
}

// AddControllerIndex adds ControllerIndex to informer unless it is already
// there. It must be called before the informer starts; it returns the
// informer's error otherwise.
func AddControllerIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[ControllerIndex]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{ControllerIndex: controllerIndexFunc})
}

// ByController returns the objects in indexer controlled by the owner with uid
// (any namespace: UIDs are unique), as type T; objects of other types are skipped.
func ByController[T any](indexer cache.Indexer, uid types.UID) ([]T, error) {
	return byIndex[T](indexer, ControllerIndexKey(uid))
}

// Orphans returns the objects in namespace that have no ControllerRef, as type T.
func Orphans[T any](indexer cache.Indexer, namespace string) ([]T, error) {
	return byIndex[T](indexer, OrphanIndexKey(namespace))
}

func byIndex[T any](indexer cache.Indexer, key string) ([]T, error) {
	objs, err := indexer.ByIndex(ControllerIndex, key)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}
