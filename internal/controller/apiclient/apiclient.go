// Package apiclient is the one adapter from a kubernetes.Interface and a dynamic.Interface to the narrow
// clients the controllers declare (deployment.Client, replicaset.Client): each method is one request to the
// API server (typed and protobuf; the creates that carry a pod template as stored, with fields kubedeploy's
// API does not know, as JSON through the dynamic client, IM-8), its error the API server's or the
// transport's, unchanged. It owns no state and no policy (retries, caching and
// expectations are the controllers'); it must never import a test package (fake clientsets, client-go's
// testing package), so that the binaries link none.
package apiclient

import (
	"context"
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

var (
	replicaSetsResource = appsv1.SchemeGroupVersion.WithResource("replicasets")
	podsResource        = v1.SchemeGroupVersion.WithResource("pods")
)

// ErrNoDynamicClient is returned by the JSON creates of a Client built without a dynamic client.
var ErrNoDynamicClient = errors.New("apiclient: no dynamic client to send a pod template with fields kubedeploy's API does not know")

// Client sends the controllers' requests through a kubernetes.Interface and, for the JSON creates, a
// dynamic.Interface. It implements deployment.Client and replicaset.Client. Build it with New.
type Client struct {
	k   kubernetes.Interface
	dyn dynamic.Interface
}

// New returns a Client over k (typed requests) and dyn (the creates of CreateReplicaSetUnstructured and
// CreatePodUnstructured, IM-8); a nil dyn makes those return ErrNoDynamicClient (a reader: the shadow
// check's).
func New(k kubernetes.Interface, dyn dynamic.Interface) *Client { return &Client{k: k, dyn: dyn} }

// GetDeployment GETs a Deployment.
func (c *Client) GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return c.k.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateDeploymentStatus PUTs d to its status subresource.
func (c *Client) UpdateDeploymentStatus(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	return c.k.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
}

// PatchDeployment PATCHes a Deployment with patch of type pt.
func (c *Client) PatchDeployment(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.Deployment, error) {
	return c.k.AppsV1().Deployments(namespace).Patch(ctx, name, pt, patch, metav1.PatchOptions{})
}

// GetReplicaSet GETs a ReplicaSet.
func (c *Client) GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return c.k.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListReplicaSets LISTs the ReplicaSets of namespace.
func (c *Client) ListReplicaSets(ctx context.Context, namespace string) (*appsv1.ReplicaSetList, error) {
	return c.k.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
}

// CreateReplicaSet POSTs rs to rs.Namespace.
func (c *Client) CreateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return c.k.AppsV1().ReplicaSets(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{})
}

// CreateReplicaSetUnstructured POSTs rs, as JSON, to its namespace through the dynamic client.
func (c *Client) CreateReplicaSetUnstructured(ctx context.Context, rs *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.dyn == nil {
		return nil, ErrNoDynamicClient
	}
	return c.dyn.Resource(replicaSetsResource).Namespace(rs.GetNamespace()).Create(ctx, rs, metav1.CreateOptions{})
}

// PatchReplicaSet PATCHes a ReplicaSet with patch of type pt.
func (c *Client) PatchReplicaSet(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error) {
	return c.k.AppsV1().ReplicaSets(namespace).Patch(ctx, name, pt, patch, metav1.PatchOptions{})
}

// PatchReplicaSetStatus PATCHes a ReplicaSet's status subresource with patch of type pt.
func (c *Client) PatchReplicaSetStatus(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error) {
	return c.k.AppsV1().ReplicaSets(namespace).Patch(ctx, name, pt, patch, metav1.PatchOptions{}, "status")
}

// DeleteReplicaSet DELETEs a ReplicaSet.
func (c *Client) DeleteReplicaSet(ctx context.Context, namespace, name string) error {
	return c.k.AppsV1().ReplicaSets(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// ListPods LISTs the pods of namespace that selector matches.
func (c *Client) ListPods(ctx context.Context, namespace string, selector labels.Selector) (*v1.PodList, error) {
	return c.k.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
}

// CreatePod POSTs pod to namespace.
func (c *Client) CreatePod(ctx context.Context, namespace string, pod *v1.Pod) (*v1.Pod, error) {
	return c.k.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// CreatePodUnstructured POSTs pod, as JSON, to namespace through the dynamic client.
func (c *Client) CreatePodUnstructured(ctx context.Context, namespace string, pod *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if c.dyn == nil {
		return nil, ErrNoDynamicClient
	}
	return c.dyn.Resource(podsResource).Namespace(namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// PatchPod PATCHes a pod with patch of type pt.
func (c *Client) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*v1.Pod, error) {
	return c.k.CoreV1().Pods(namespace).Patch(ctx, name, pt, patch, metav1.PatchOptions{})
}

// DeletePod DELETEs a pod.
func (c *Client) DeletePod(ctx context.Context, namespace, name string) error {
	return c.k.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
