package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Client is every request the ReplicaSet controller sends to the API server: its writes and the reads that
// bypass the informer caches. Package apiclient implements it over a kubernetes.Interface (the manager's);
// package dryrun implements it with writes recorded and answered, never sent (the simulator, the shadow
// check). Errors are the API server's (apierrors: NotFound, a 422 Invalid for a refused JSON patch test, a
// Forbidden create in a terminating namespace) or the transport's. Objects returned are the caller's to
// change.
type Client interface {
	// GetReplicaSet reads a ReplicaSet from the API server (a quorum read): when the IM-4 guard says the
	// cache is stale for the key, the re-check before adoption (AD-3) and before a status write is retried.
	GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// PatchReplicaSetStatus applies patch, of type pt (a JSON patch replacing the status, conditioned on the
	// UID; RS-18), to the ReplicaSet's status subresource and returns the ReplicaSet as stored (IM-2).
	PatchReplicaSetStatus(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error)
	// ListPods lists the pods of namespace that selector matches from the API server (a quorum read; IM-4).
	ListPods(ctx context.Context, namespace string, selector labels.Selector) (*v1.PodList, error)
	// CreatePod creates pod in namespace (RS-9; pod.GenerateName set, Name empty) and returns it as stored.
	CreatePod(ctx context.Context, namespace string, pod *v1.Pod) (*v1.Pod, error)
	// CreatePodUnstructured creates pod, a pod as JSON whose spec is a ReplicaSet's pod template spec as stored
	// (rawtemplate.PodWithTemplateSpec: fields kubedeploy's API does not know included, IM-8), in namespace and
	// returns it as stored, JSON; errors as CreatePod's. The live adapter sends it through the dynamic client;
	// the recording client records it.
	CreatePodUnstructured(ctx context.Context, namespace string, pod *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// PatchPod applies patch, of type pt (a strategic merge patch adopting or releasing the pod: AD-4,
	// AD-5), to the pod and returns it as stored.
	PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*v1.Pod, error)
	// DeletePod deletes a pod (RS-10, RS-14); NotFound when it is gone already.
	DeletePod(ctx context.Context, namespace, name string) error
}
