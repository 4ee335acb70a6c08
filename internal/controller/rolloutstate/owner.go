package rolloutstate

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
)

// DeploymentOf returns the name of the Deployment that controls obj (a ReplicaSet): the name in obj's
// ControllerRef when that names kind Deployment of the apps group (any version); "" and false for none, another
// kind or another group. It reads only obj, so the Deployment may not exist.
func DeploymentOf(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if !isApps(ref, "Deployment") {
		return "", false
	}
	return ref.Name, true
}

// ReplicaSetOf returns the ReplicaSet that controls pod: the one get (a namespace's lister Get, or any lookup by
// name in pod's namespace) finds under the name of pod's ControllerRef, when that names kind ReplicaSet of the
// apps group and the found ReplicaSet's UID is the ref's (EH-5, ownership.Resolve); nil and false otherwise
// (no ControllerRef, another owner, a ReplicaSet not found or replaced under the same name).
func ReplicaSetOf(pod metav1.Object, get func(name string) (*appsv1.ReplicaSet, error)) (*appsv1.ReplicaSet, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if !isApps(ref, "ReplicaSet") {
		return nil, false
	}
	return ownership.Resolve(ref, "ReplicaSet", get)
}

// DeploymentOfPod is the Deployment a pod belongs to: ReplicaSetOf(pod, get), then DeploymentOf that
// ReplicaSet. It returns the ReplicaSet and the Deployment's name; nil, "" and false when either link is
// missing. The rollout metrics, kubedeploy_deployment_unavailable_pods and the shadow check resolve pods with it.
func DeploymentOfPod(pod metav1.Object, get func(name string) (*appsv1.ReplicaSet, error)) (*appsv1.ReplicaSet, string, bool) {
	rs, ok := ReplicaSetOf(pod, get)
	if !ok {
		return nil, "", false
	}
	name, ok := DeploymentOf(rs)
	if !ok {
		return nil, "", false
	}
	return rs, name, true
}

// isApps reports whether ref names kind in the apps API group.
func isApps(ref *metav1.OwnerReference, kind string) bool {
	if ref == nil || ref.Kind != kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == appsv1.GroupName
}
