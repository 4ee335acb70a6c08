package shard

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
)

// PodsByNamespace returns every namespace of the cluster and its pods now (namespace → pods), both listed from
// the API server's cache (resourceVersion "0"), pods as metadata only: what `kubedeploy shards` shows. The
// errors are the API server's, naming the list that failed.
func PodsByNamespace(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) (map[string]int, error) {
	counts, err := everyNamespace(ctx, client)
	if err != nil {
		return nil, err
	}
	pods, err := meta.Resource(v1.SchemeGroupVersion.WithResource("pods")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods.Items {
		counts[p.Namespace]++
	}
	return counts, nil
}

// everyNamespace returns every namespace of the cluster with a count of 0 (namespace → 0), listed from the API
// server's cache (resourceVersion "0"); the error is the list's.
func everyNamespace(ctx context.Context, client kubernetes.Interface) (map[string]int, error) {
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	counts := make(map[string]int, len(nss.Items))
	for _, ns := range nss.Items {
		counts[ns.Name] = 0
	}
	return counts, nil
}

// SteadyByNamespace returns every namespace of the cluster and its steady pods (namespace → pods): the pods it
// holds at rest, as an owner's Running.Steady counts them from its caches (SH-8), so that a new ring's bounds,
// and a re-split's, follow the pods the namespaces will hold, not a rollout's surge nor pods not created yet
// (Deployments made before any controller ran have no pods). A namespace's steady pods are its Deployments'
// spec.replicas (1 when unset), its pods not controlled by a ReplicaSet, and those of ReplicaSets not
// controlled by a Deployment (which Steady counts by their spec.replicas: listed as metadata, they have none). Everything is listed
// from the API server's cache (resourceVersion "0"), ReplicaSets and pods as metadata only; where Deployments
// or ReplicaSets may not be listed (Forbidden), every pod counts. The errors are the API server's, naming the
// list that failed.
func SteadyByNamespace(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) (map[string]int, error) {
	counts, err := everyNamespace(ctx, client)
	if err != nil {
		return nil, err
	}
	deployments, err := client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing Deployments: %w", err)
	}
	rss, rsErr := meta.Resource(appsv1.SchemeGroupVersion.WithResource("replicasets")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if rsErr != nil && !apierrors.IsForbidden(rsErr) {
		return nil, fmt.Errorf("listing ReplicaSets: %w", rsErr)
	}
	everyPod := err != nil || rsErr != nil // a replica that may not list them (--controllers=replicaset's role)
	if everyPod {
		deployments, rss = &appsv1.DeploymentList{}, &metav1.PartialObjectMetadataList{}
	}
	pods, err := meta.Resource(v1.SchemeGroupVersion.WithResource("pods")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range deployments.Items {
		d := &deployments.Items[i]
		counts[d.Namespace] += int(ptr.Deref(d.Spec.Replicas, 1))
	}
	standalone := map[types.UID]bool{}
	for i := range rss.Items {
		if !ControlledBy(&rss.Items[i], "Deployment") {
			standalone[rss.Items[i].UID] = true
		}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if c := metav1.GetControllerOfNoCopy(p); everyPod || c == nil || !isApps(c, "ReplicaSet") || standalone[c.UID] {
			counts[p.Namespace]++
		}
	}
	return counts, nil
}

// ControlledBy reports whether obj's controller is of kind (a Deployment or a ReplicaSet) in the apps group.
func ControlledBy(obj metav1.Object, kind string) bool {
	c := metav1.GetControllerOfNoCopy(obj)
	return c != nil && isApps(c, kind)
}

// isApps reports whether ref names a kind of the apps group (any version), without allocating: it runs for
// every cached pod at each of the coordinator's rounds.
func isApps(ref *metav1.OwnerReference, kind string) bool {
	return ref.Kind == kind && strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/")
}
