package dryrun

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// The reads: Config.Reader's answers.

// GetDeployment returns Reader.GetDeployment's answer.
func (c *Client) GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return c.cfg.Reader.GetDeployment(ctx, namespace, name)
}

// GetReplicaSet returns Reader.GetReplicaSet's answer.
func (c *Client) GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return c.cfg.Reader.GetReplicaSet(ctx, namespace, name)
}

// ListReplicaSets returns Reader.ListReplicaSets's answer.
func (c *Client) ListReplicaSets(ctx context.Context, namespace string) (*appsv1.ReplicaSetList, error) {
	return c.cfg.Reader.ListReplicaSets(ctx, namespace)
}

// ListPods returns Reader.ListPods's answer.
func (c *Client) ListPods(ctx context.Context, namespace string, selector labels.Selector) (*v1.PodList, error) {
	return c.cfg.Reader.ListPods(ctx, namespace, selector)
}

// The writes: recorded and answered (Client.write).

// UpdateDeploymentStatus records an update of d's status and returns d as OnWrite left it; NotFound for a
// Deployment Current does not know.
func (c *Client) UpdateDeploymentStatus(_ context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	w := Write{Verb: VerbUpdate, Resource: Deployments, Subresource: "status", Namespace: d.Namespace, Name: d.Name, Object: d.DeepCopy()}
	return answer[*appsv1.Deployment](c.write(w, "", nil))
}

// PatchDeployment records a patch of a Deployment and returns the Deployment it leaves.
func (c *Client) PatchDeployment(_ context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.Deployment, error) {
	w := Write{Verb: VerbPatch, Resource: Deployments, Namespace: namespace, Name: name}
	return answer[*appsv1.Deployment](c.write(w, pt, patch))
}

// CreateReplicaSet records the creation of rs and returns rs as OnWrite left it; AlreadyExists for a name
// Current knows.
func (c *Client) CreateReplicaSet(_ context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	w := Write{Verb: VerbCreate, Resource: ReplicaSets, Namespace: rs.Namespace, Name: rs.Name, Object: rs.DeepCopy()}
	return answer[*appsv1.ReplicaSet](c.write(w, "", nil))
}

// CreateReplicaSetUnstructured records the creation of rs, sent as JSON (IM-8): typed in Write.Object, as sent
// in Write.Sent. It answers as CreateReplicaSet does, as JSON with the sent fields kubedeploy's API does not know
// (rawtemplate.Carry); BadRequest for an rs that is not a ReplicaSet or does not convert.
func (c *Client) CreateReplicaSetUnstructured(_ context.Context, rs *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	typed := &appsv1.ReplicaSet{}
	if err := fromSent(rs, "ReplicaSet", typed); err != nil {
		return nil, err
	}
	w := Write{Verb: VerbCreate, Resource: ReplicaSets, Namespace: typed.Namespace, Name: typed.Name, Object: typed, Sent: runtime.DeepCopyJSON(rs.Object)}
	obj, err := c.write(w, "", nil)
	if err != nil {
		return nil, err
	}
	return carried(obj, rs)
}

// PatchReplicaSet records a patch of a ReplicaSet and returns the ReplicaSet it leaves.
func (c *Client) PatchReplicaSet(_ context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error) {
	w := Write{Verb: VerbPatch, Resource: ReplicaSets, Namespace: namespace, Name: name}
	return answer[*appsv1.ReplicaSet](c.write(w, pt, patch))
}

// PatchReplicaSetStatus records a patch of a ReplicaSet's status subresource and returns the ReplicaSet it
// leaves (the patch is applied to the whole object: the controller's patches touch status alone).
func (c *Client) PatchReplicaSetStatus(_ context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error) {
	w := Write{Verb: VerbPatch, Resource: ReplicaSets, Subresource: "status", Namespace: namespace, Name: name}
	return answer[*appsv1.ReplicaSet](c.write(w, pt, patch))
}

// DeleteReplicaSet records the deletion of a ReplicaSet; NotFound for one Current does not know.
func (c *Client) DeleteReplicaSet(_ context.Context, namespace, name string) error {
	_, err := c.write(Write{Verb: VerbDelete, Resource: ReplicaSets, Namespace: namespace, Name: name}, "", nil)
	return err
}

// CreatePod records the creation of pod in namespace and returns pod as OnWrite left it (unnamed when it has
// only a generateName and OnWrite does not name it).
func (c *Client) CreatePod(_ context.Context, namespace string, pod *v1.Pod) (*v1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Namespace = namespace
	w := Write{Verb: VerbCreate, Resource: Pods, Namespace: namespace, Name: pod.Name, Object: pod}
	return answer[*v1.Pod](c.write(w, "", nil))
}

// CreatePodUnstructured records the creation of pod in namespace, sent as JSON (IM-8): typed in Write.Object, as
// sent in Write.Sent. It answers as CreatePod does, as JSON with the sent fields kubedeploy's API does not know
// (rawtemplate.Carry); BadRequest for a pod that is not a Pod or does not convert.
func (c *Client) CreatePodUnstructured(_ context.Context, namespace string, pod *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	typed := &v1.Pod{}
	if err := fromSent(pod, "Pod", typed); err != nil {
		return nil, err
	}
	typed.Namespace = namespace
	w := Write{Verb: VerbCreate, Resource: Pods, Namespace: namespace, Name: typed.Name, Object: typed, Sent: runtime.DeepCopyJSON(pod.Object)}
	obj, err := c.write(w, "", nil)
	if err != nil {
		return nil, err
	}
	return carried(obj, pod)
}

// PatchPod records a patch of a pod and returns the pod it leaves.
func (c *Client) PatchPod(_ context.Context, namespace, name string, pt types.PatchType, patch []byte) (*v1.Pod, error) {
	w := Write{Verb: VerbPatch, Resource: Pods, Namespace: namespace, Name: name}
	return answer[*v1.Pod](c.write(w, pt, patch))
}

// DeletePod records the deletion of a pod; NotFound for one Current does not know.
func (c *Client) DeletePod(_ context.Context, namespace, name string) error {
	_, err := c.write(Write{Verb: VerbDelete, Resource: Pods, Namespace: namespace, Name: name}, "", nil)
	return err
}

// answer is obj as a T, or err; an error when OnWrite left an object of another type.
func answer[T runtime.Object](obj runtime.Object, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("dryrun: the write left a %T, not a %T", obj, zero)
	}
	return t, nil
}

// fromSent fills typed from u, an object sent as JSON that must be of kind; fields typed lacks are dropped. The
// error is a BadRequest, as the API server answers an object it cannot decode.
func fromSent(u *unstructured.Unstructured, kind string, typed runtime.Object) error {
	if u.GetKind() != kind {
		return apierrors.NewBadRequest(fmt.Sprintf("dryrun: a create of a %s was sent a %q", kind, u.GetKind()))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("dryrun: the %s sent does not decode: %v", kind, err))
	}
	return nil
}

// carried is the answer to a create of sent that left obj: obj as JSON with sent's fields kubedeploy's API does not
// know (rawtemplate.Carry). The error is an InternalError when obj does not convert.
func carried(obj runtime.Object, sent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := rawtemplate.Carry(obj, sent.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}
