package shard

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// PodsByNamespace returns every namespace of the cluster and its pods (namespace → pods), both listed from the
// API server's cache (resourceVersion "0"), pods as metadata only: what a new ring's bounds are measured from
// (SH-5) and what `kubedeploy shards` shows. The errors are the API server's, naming the list that failed.
func PodsByNamespace(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) (map[string]int, error) {
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	pods, err := meta.Resource(v1.SchemeGroupVersion.WithResource("pods")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	counts := make(map[string]int, len(nss.Items))
	for _, ns := range nss.Items {
		counts[ns.Name] = 0
	}
	for _, p := range pods.Items {
		counts[p.Namespace]++
	}
	return counts, nil
}
