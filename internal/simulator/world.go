package simulator

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
)

var (
	deploymentsResource = appsv1.SchemeGroupVersion.WithResource(dryrun.Deployments)
	replicaSetsResource = appsv1.SchemeGroupVersion.WithResource(dryrun.ReplicaSets)
	podsResource        = v1.SchemeGroupVersion.WithResource(dryrun.Pods)
	// resourceOf is the tracker's resource for each of dryrun's.
	resourceOf = map[string]schema.GroupVersionResource{
		dryrun.Deployments: deploymentsResource, dryrun.ReplicaSets: replicaSetsResource, dryrun.Pods: podsResource,
	}
)

// world reads the simulated cluster's objects from its tracker: the
// controllers' uncached reads (a dryrun.Reader), the object a write applies
// to (current) and the simulation's own reads. Objects returned are copies.
// It returns the tracker's errors (NotFound).
type world struct {
	tracker clienttesting.ObjectTracker
}

// GetDeployment returns the stored Deployment.
func (w world) GetDeployment(_ context.Context, namespace, name string) (*appsv1.Deployment, error) {
	obj, err := w.tracker.Get(deploymentsResource, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.Deployment), nil
}

// GetReplicaSet returns the stored ReplicaSet.
func (w world) GetReplicaSet(_ context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	obj, err := w.tracker.Get(replicaSetsResource, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.ReplicaSet), nil
}

// ListReplicaSets returns the ReplicaSets stored in namespace ("": all).
func (w world) ListReplicaSets(_ context.Context, namespace string) (*appsv1.ReplicaSetList, error) {
	obj, err := w.tracker.List(replicaSetsResource, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), namespace)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.ReplicaSetList), nil
}

// ListPods returns the pods stored in namespace ("": all) that selector matches.
func (w world) ListPods(_ context.Context, namespace string, selector labels.Selector) (*v1.PodList, error) {
	obj, err := w.tracker.List(podsResource, v1.SchemeGroupVersion.WithKind("Pod"), namespace)
	if err != nil {
		return nil, err
	}
	list := obj.(*v1.PodList)
	if selector.Empty() {
		return list, nil
	}
	matched := list.Items[:0]
	for _, p := range list.Items {
		if selector.Matches(labels.Set(p.Labels)) {
			matched = append(matched, p)
		}
	}
	list.Items = matched
	return list, nil
}

// listDeployments returns the Deployments stored in namespace ("": all).
func (w world) listDeployments(namespace string) (*appsv1.DeploymentList, error) {
	obj, err := w.tracker.List(deploymentsResource, appsv1.SchemeGroupVersion.WithKind("Deployment"), namespace)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.DeploymentList), nil
}

// current is the stored object a write applies to (dryrun.Config.Current).
func (w world) current(resource, namespace, name string) (runtime.Object, bool) {
	obj, err := w.tracker.Get(resourceOf[resource], namespace, name)
	return obj, err == nil
}
