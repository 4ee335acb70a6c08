package deploy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// ApplyIdentity creates or updates, with client (which needs to be allowed to
// grant these permissions, e.g. an admin), everything in the manifests except
// workloads: the Namespace, the ServiceAccount, the ClusterRoles, Roles and
// their bindings. It is idempotent. `kubedeploy up` calls it so its
// controllers run with exactly these permissions. It returns the first API error.
func ApplyIdentity(ctx context.Context, client kubernetes.Interface) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	return applyAll(ctx, client, objs)
}

// ApplyShardedIdentity applies, as ApplyIdentity does, the RBAC of deploy/sharded: what sharded mode adds to
// ApplyIdentity's (call that first: the ServiceAccount and namespace are its). It returns the first API error.
func ApplyShardedIdentity(ctx context.Context, client kubernetes.Interface) error {
	objs, err := ShardedObjects()
	if err != nil {
		return err
	}
	return applyAll(ctx, client, objs)
}

// applyAll applies the identity and RBAC objects of objs in order (applyOne), stopping at the first error.
func applyAll(ctx context.Context, client kubernetes.Interface, objs []runtime.Object) error {
	for _, obj := range objs {
		if err := applyOne(ctx, client, obj); err != nil {
			return err
		}
	}
	return nil
}

// applyOne creates obj or, if it exists, updates it; kinds other than the
// identity and RBAC kinds are skipped.
func applyOne(ctx context.Context, client kubernetes.Interface, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		err = createOrUpdate(ctx, o, client.CoreV1().Namespaces().Create, client.CoreV1().Namespaces().Get, client.CoreV1().Namespaces().Update)
	case *corev1.ServiceAccount:
		c := client.CoreV1().ServiceAccounts(o.Namespace)
		err = createOrUpdate(ctx, o, c.Create, c.Get, c.Update)
	case *rbacv1.ClusterRole:
		c := client.RbacV1().ClusterRoles()
		err = createOrUpdate(ctx, o, c.Create, c.Get, c.Update)
	case *rbacv1.ClusterRoleBinding:
		c := client.RbacV1().ClusterRoleBindings()
		err = createOrUpdate(ctx, o, c.Create, c.Get, c.Update)
	case *rbacv1.Role:
		c := client.RbacV1().Roles(o.Namespace)
		err = createOrUpdate(ctx, o, c.Create, c.Get, c.Update)
	case *rbacv1.RoleBinding:
		c := client.RbacV1().RoleBindings(o.Namespace)
		err = createOrUpdate(ctx, o, c.Create, c.Get, c.Update)
	}
	return err
}

type object interface {
	metav1.Object
	runtime.Object
}

// createOrUpdate creates want, or updates the existing object to want keeping
// its resourceVersion (and, for a Namespace or ServiceAccount, the existing
// object as is: only RBAC content is enforced).
func createOrUpdate[T object](ctx context.Context, want T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	kind := fmt.Sprintf("%T", want)
	_, err := create(ctx, want, metav1.CreateOptions{FieldManager: "kubedeploy-up"})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", kind, want.GetName(), err)
		}
		return nil
	}
	switch any(want).(type) {
	case *corev1.Namespace, *corev1.ServiceAccount:
		return nil
	}
	existing, err := get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, want.GetName(), err)
	}
	want = want.DeepCopyObject().(T)
	want.SetResourceVersion(existing.GetResourceVersion())
	if _, err := update(ctx, want, metav1.UpdateOptions{FieldManager: "kubedeploy-up"}); err != nil {
		return fmt.Errorf("updating %s %s: %w", kind, want.GetName(), err)
	}
	return nil
}
