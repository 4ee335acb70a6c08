package ownership

import (
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// ControllerIndex is the name of the informer index that maps objects to their
// controller (a Deployment or ReplicaSet, by the ControllerRef rule of owner.go). Both controllers add it to the shared pod informer (and the
// Deployment controller to the ReplicaSet informer); AddControllerIndex is
// idempotent so either may add it first.
const ControllerIndex = "kubedeploy.controllerUID"

// ControllerIndexKey is the index value for objects controlled by the owner with uid.
func ControllerIndexKey(uid types.UID) string { return string(uid) }

// OrphanIndexKey is the index value for objects in namespace that have no ControllerRef.
func OrphanIndexKey(namespace string) string { return "orphan/" + namespace }

// controllerIndexFunc indexes an object controlled by a Deployment or ReplicaSet under its UID (ControllerUID,
// the one ControllerRef rule), an object without a ControllerRef as an orphan of its namespace, and an object
// controlled by anything else not at all: neither ours nor adoptable.
func controllerIndexFunc(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	if uid, ok := ControllerUID(m); ok {
		return []string{ControllerIndexKey(uid)}, nil
	}
	if metav1.GetControllerOfNoCopy(m) != nil {
		return nil, nil
	}
	return []string{OrphanIndexKey(m.GetNamespace())}, nil
}

func metaOf(obj any) (metav1.Object, error) {
	// An indexer has no logger to give: the error says what ObjectFrom would have logged.
	m, ok := runner.ObjectFrom[metav1.Object](logr.Discard(), obj)
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

// ByController returns the objects in indexer controlled by the Deployment or
// ReplicaSet with uid (any namespace: UIDs are unique; ControllerUID), as type
// T; objects of other types are skipped.
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
	return appendAs(make([]T, 0, len(objs)), objs), nil
}

// appendAs appends the objects of objs that are of type T to out.
func appendAs[T any](out []T, objs []any) []T {
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// LabelIndex is the name of the informer index AddLabelIndex adds for label key.
func LabelIndex(key string) string { return "kubedeploy.label/" + key }

// labelIndexKey is the LabelIndex value of objects in namespace labelled key=value.
func labelIndexKey(namespace, value string) string { return namespace + "/" + value }

// AddLabelIndex adds LabelIndex(key) to informer unless it is already there: it maps every object carrying label
// key to "<namespace>/<value>" (objects without it are not indexed). The controllers add it for
// pod-template-hash, which every ReplicaSet a Deployment manages selects on (OM-10), so the pods of such a
// ReplicaSet are found without reading every pod of the namespace. It must be called before the informer
// starts; it returns the informer's error otherwise.
func AddLabelIndex(informer cache.SharedIndexInformer, key string) error {
	name := LabelIndex(key)
	if _, ok := informer.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{name: func(obj any) ([]string, error) {
		m, err := metaOf(obj)
		if err != nil {
			return nil, err
		}
		if v, ok := m.GetLabels()[key]; ok {
			return []string{labelIndexKey(m.GetNamespace(), v)}, nil
		}
		return nil, nil
	}})
}

// SelectedBy returns the objects of type T in namespace that selector (the parsed form of ls) matches, whatever
// their owner. When ls's matchLabels pins key and indexer has LabelIndex(key), only the objects labelled with
// that value are read (then filtered by the whole selector); otherwise every object of the namespace is. Both
// give the same objects, in no particular order. It returns the indexer's error.
func SelectedBy[T any](indexer cache.Indexer, namespace string, ls *metav1.LabelSelector, selector labels.Selector, key string) ([]T, error) {
	var out []T
	keep := func(obj any) {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	value, pinned := "", false
	if ls != nil {
		value, pinned = ls.MatchLabels[key]
	}
	if _, indexed := indexer.GetIndexers()[LabelIndex(key)]; !pinned || !indexed {
		return out, cache.ListAllByNamespace(indexer, namespace, selector, keep)
	}
	objs, err := indexer.ByIndex(LabelIndex(key), labelIndexKey(namespace, value))
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if m, err := metaOf(obj); err == nil && selector.Matches(labels.Set(m.GetLabels())) {
			keep(obj)
		}
	}
	return out, nil
}

// Candidates returns what an owner with uid in namespace could claim: the objects controlled by it and the
// orphans of namespace, as type T (ByController then Orphans). Objects controlled by another owner are left out;
// the claim would skip them (AD-1).
func Candidates[T any](indexer cache.Indexer, uid types.UID, namespace string) ([]T, error) {
	owned, err := indexer.ByIndex(ControllerIndex, ControllerIndexKey(uid))
	if err != nil {
		return nil, err
	}
	orphans, err := indexer.ByIndex(ControllerIndex, OrphanIndexKey(namespace))
	if err != nil {
		return nil, err
	}
	return appendAs(appendAs(make([]T, 0, len(owned)+len(orphans)), owned), orphans), nil
}
