package rollout

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// storedObjects reads Deployment ns/name (unless withDeployment is false: -f gives the new version) and the
// ReplicaSets of ns as JSON, as the API server stores them, for the simulator (simulator.State.Stored): on a
// cluster newer than kubedeploy's API their pod templates may have fields kubedeploy does not know, which the
// controller folds into the pod-template-hash and copies into ReplicaSets and pods (IM-8), and so must the plan.
// Its errors are the client's.
func storedObjects(ctx context.Context, c *clusterFlags, ns, name string, withDeployment bool) ([]*unstructured.Unstructured, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	if withDeployment {
		d, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading deployment %s/%s as stored: %w", ns, name, err)
		}
		out = append(out, d)
	}
	list, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("replicasets")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the replica sets of %s as stored: %w", ns, err)
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}
