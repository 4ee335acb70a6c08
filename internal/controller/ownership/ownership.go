package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
)

// NewControllerRef returns the ControllerRef the controllers write (OM-24):
// apiVersion/kind of the owner, its name and UID, controller and
// blockOwnerDeletion both true.
func NewControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// Claimer claims objects of type T for one owner during one sync (AD-1). Make a
// new Claimer per sync: the CanAdopt check is memoized for its lifetime (AD-3).
type Claimer[T metav1.Object] struct {
	// Owner is the controller (Deployment or ReplicaSet) claiming objects.
	Owner metav1.Object
	// OwnerKind is the owner's group/version/kind, used in the ControllerRef.
	OwnerKind schema.GroupVersionKind
	// ObjectKind names the claimed kind in errors: "ReplicaSet" or "Pod".
	ObjectKind string
	// Selector is the owner's selector, matched against object labels (AD-2).
	Selector labels.Selector
	// CanAdopt is checked at most once, before the first adoption (AD-3). nil
	// means adoption is always allowed.
	CanAdopt func(ctx context.Context) error
	// Patch sends a strategic-merge patch to obj and returns the object the
	// API server returned (IM-2: the sync continues from it).
	Patch func(ctx context.Context, obj T, patch []byte) (T, error)

	once        sync.Once
	canAdoptErr error
}

// Claim returns the objects that the owner controls after adopting matching
// orphans and releasing owned objects that no longer match (AD-1): each
// adopted object as the API server returned it from the adopt patch (IM-2,
// so a later write in the same sync carries its current resourceVersion),
// every other one as passed in. Adopt and release errors other than those
// AD-1/AD-5 ignore are aggregated into the returned error; objects that were
// claimed despite errors are still returned.
func (c *Claimer[T]) Claim(ctx context.Context, objs []T) ([]T, error) {
	claimed := make([]T, 0, len(objs))
	var errs []error
	for _, obj := range objs {
		got, ok, err := c.claimOne(ctx, obj)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			claimed = append(claimed, got)
		}
	}
	return claimed, utilerrors.NewAggregate(errs)
}

// claimOne returns obj (or, once adopted, the patched obj) and whether the
// owner controls it.
func (c *Claimer[T]) claimOne(ctx context.Context, obj T) (T, bool, error) {
	matches := c.Selector.Matches(labels.Set(obj.GetLabels()))
	ownerDeleting := c.Owner.GetDeletionTimestamp() != nil
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.UID != c.Owner.GetUID() || !RefersTo(ref, c.OwnerKind.GroupKind()) {
			return obj, false, nil // another owner's (AD-1), or a ref that only borrows our UID
		}
		if matches {
			return obj, true, nil
		}
		if ownerDeleting {
			return obj, false, nil
		}
		return obj, false, c.release(ctx, obj)
	}
	if ownerDeleting || !matches || obj.GetDeletionTimestamp() != nil || obj.GetNamespace() != c.Owner.GetNamespace() {
		return obj, false, nil
	}
	adopted, err := c.adopt(ctx, obj)
	if err != nil {
		// AD-1: only a NotFound from the adopt patch itself is ignored. A
		// failed CanAdopt check wraps its cause (possibly NotFound for an
		// owner that is gone) and must fail the adoption (AD-3).
		if c.canAdoptErr == nil && apierrors.IsNotFound(err) {
			return obj, false, nil
		}
		return obj, false, err
	}
	return adopted, true, nil
}

// adopt sends the AD-4 patch and returns the adopted object.
func (c *Claimer[T]) adopt(ctx context.Context, obj T) (T, error) {
	c.once.Do(func() {
		if c.CanAdopt != nil {
			c.canAdoptErr = c.CanAdopt(ctx)
		}
	})
	if c.canAdoptErr != nil {
		return obj, fmt.Errorf("can't adopt %s %s/%s (%s): %w", c.ObjectKind, obj.GetNamespace(), obj.GetName(), obj.GetUID(), c.canAdoptErr)
	}
	klog.FromContext(ctx).V(2).Info("Adopting object", "kind", c.ObjectKind, "object", klog.KObj(obj), "owner", klog.KObj(c.Owner))
	patch, err := AdoptPatch(NewControllerRef(c.Owner, c.OwnerKind), obj.GetUID())
	if err != nil {
		return obj, err
	}
	return c.Patch(ctx, obj, patch)
}

// release sends the AD-5 patch.
func (c *Claimer[T]) release(ctx context.Context, obj T) error {
	klog.FromContext(ctx).V(2).Info("Releasing object", "kind", c.ObjectKind, "object", klog.KObj(obj), "owner", klog.KObj(c.Owner))
	patch, err := ReleasePatch(c.Owner.GetUID(), obj.GetUID())
	if err != nil {
		return err
	}
	_, err = c.Patch(ctx, obj, patch)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		// AD-5: already gone, or no longer owned by us.
		return nil
	}
	return err
}

type objectMeta struct {
	OwnerReferences []map[string]any `json:"ownerReferences"`
	UID             types.UID        `json:"uid"`
}

// AdoptPatch returns the strategic-merge patch that adds ref as the controller
// ownerReference of the object with UID objUID, the UID acting as a
// precondition (AD-4).
func AdoptPatch(ref *metav1.OwnerReference, objUID types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": objectMeta{
		OwnerReferences: []map[string]any{{
			"apiVersion":         ref.APIVersion,
			"kind":               ref.Kind,
			"name":               ref.Name,
			"uid":                ref.UID,
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
		UID: objUID,
	}})
}

// ReleasePatch returns the strategic-merge patch that removes the
// ownerReference with UID ownerUID from the object with UID objUID (AD-5).
func ReleasePatch(ownerUID, objUID types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": objectMeta{
		OwnerReferences: []map[string]any{{"$patch": "delete", "uid": ownerUID}},
		UID:             objUID,
	}})
}

// RecheckDeletionTimestamp returns a CanAdopt check (AD-3): get must do an
// uncached, quorum read of the owner. The check fails if the read fails, the
// owner's UID changed, or the owner is being deleted. kind is "Deployment" or
// "ReplicaSet" for the error text.
func RecheckDeletionTimestamp(owner metav1.Object, kind string, get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return fmt.Errorf("can't recheck DeletionTimestamp: %w", err)
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("original %s %v/%v is gone: got uid %v, wanted %v", kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if ts := fresh.GetDeletionTimestamp(); ts != nil {
			return fmt.Errorf("%v/%v has just been deleted at %v", owner.GetNamespace(), owner.GetName(), ts)
		}
		return nil
	}
}
