package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Client is every request the Deployment controller sends to the API server: its writes and the reads that
// bypass the informer caches. Package apiclient implements it over a kubernetes.Interface (the manager's);
// package dryrun implements it with writes recorded and answered, never sent (the simulator, the shadow
// check). Errors are the API server's (apierrors: NotFound, AlreadyExists, Conflict, a 422 Invalid for a
// refused JSON patch test) or the transport's. Objects returned are the caller's to change.
type Client interface {
	// GetDeployment reads a Deployment from the API server (a quorum read): when the IM-4 guard says the
	// cache is stale for the key, and the re-check before adoption (AD-3).
	GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	// UpdateDeploymentStatus writes d's status (the status subresource, conditioned on d's resourceVersion)
	// and returns the Deployment as stored (IM-2).
	UpdateDeploymentStatus(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error)
	// PatchDeployment applies patch, of type pt (a conditioned JSON patch: IM-8, EX-2, RB-5), to the
	// Deployment and returns it as stored.
	PatchDeployment(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.Deployment, error)
	// GetReplicaSet reads a ReplicaSet from the API server, to explain a refused patch.
	GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// ListReplicaSets lists every ReplicaSet of namespace from the API server (a quorum read; IM-4).
	ListReplicaSets(ctx context.Context, namespace string) (*appsv1.ReplicaSetList, error)
	// CreateReplicaSet creates rs in rs.Namespace (RV-9) and returns it as stored; AlreadyExists for a
	// name in use (a hash collision, RV-10).
	CreateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// CreateReplicaSetUnstructured creates rs, a ReplicaSet as JSON whose pod template is a Deployment's as
	// stored (rawtemplate.ReplicaSetWithTemplate: fields kubedeploy's API does not know included, IM-8), in its
	// namespace and returns it as stored, JSON, those fields kept; errors as CreateReplicaSet's. The live
	// adapter sends it through the dynamic client; the recording client records it.
	CreateReplicaSetUnstructured(ctx context.Context, rs *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// PatchReplicaSet applies patch, of type pt, to the ReplicaSet (not its status): a strategic merge
	// patch for adoption and release (AD-4, AD-5), a conditioned JSON patch for sizes, annotations and
	// templates. It returns the ReplicaSet as stored.
	PatchReplicaSet(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte) (*appsv1.ReplicaSet, error)
	// DeleteReplicaSet deletes a ReplicaSet (history cleanup, CL-1); NotFound when it is gone already.
	DeleteReplicaSet(ctx context.Context, namespace, name string) error
}
