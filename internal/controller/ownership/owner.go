package ownership

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The one ControllerRef rule (EH-5, EH-7, AD-1): a ControllerRef names one of kubedeploy's owners when its kind is
// the owner's, its apiVersion's group is the apps group (any version; the legacy extensions group, which served
// the same Deployments and ReplicaSets until Kubernetes 1.16 and whose ownerReferences objects made then may
// still carry, counts as apps), and its UID is the owner's; when the owner is looked up by the ref's name (a cache
// holds no UID index), the object found must have that UID. Upstream checks the kind and the UID only: a ref
// with kind ReplicaSet in group example.com names a custom resource, not an apps ReplicaSet, even if someone gave
// it a real ReplicaSet's UID, and the garbage collector, which looks owners up by apiVersion and kind, would treat
// its dependent as orphaned. Every ControllerRef walk of kubedeploy (both controllers' handlers and claims, the
// controller index, the rollout metrics, kubedeploy_deployment_unavailable_pods, the shadow check and its
// watcher) goes through RefersTo, Resolve or ControllerUID.

// The owner kinds kubedeploy's ControllerRefs name.
var (
	DeploymentKind = schema.GroupKind{Group: appsv1.GroupName, Kind: "Deployment"}
	ReplicaSetKind = schema.GroupKind{Group: appsv1.GroupName, Kind: "ReplicaSet"}
)

// legacyAppsGroup is the extensions group, which served Deployments and ReplicaSets before apps.
const legacyAppsGroup = "extensions"

// RefersTo reports whether ref names an object of gk: the same kind, and an apiVersion of gk's group (any
// version; extensions counts as apps). False for a nil ref or an apiVersion that does not parse.
func RefersTo(ref *metav1.OwnerReference, gk schema.GroupKind) bool {
	if ref == nil || ref.Kind != gk.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return gv.Group == gk.Group || gk.Group == appsv1.GroupName && gv.Group == legacyAppsGroup
}

// Resolve returns the owner named by ref when ref names gk (RefersTo), get finds an object of that name (from a
// cache) and its UID equals ref.UID (EH-5). Otherwise it returns the zero T and false; a lookup error counts as
// "not found".
func Resolve[T metav1.Object](ref *metav1.OwnerReference, gk schema.GroupKind, get func(name string) (T, error)) (T, bool) {
	var zero T
	if !RefersTo(ref, gk) {
		return zero, false
	}
	obj, err := get(ref.Name)
	if err != nil || obj.GetUID() != ref.UID {
		return zero, false
	}
	return obj, true
}

// ControllerUID returns the UID of obj's ControllerRef when that names a Deployment or a ReplicaSet (RefersTo):
// the owner UID under which the controllers, the controller index and the rollout tooling find obj. False for an
// object without a ControllerRef or controlled by anything else.
func ControllerUID(obj metav1.Object) (types.UID, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if !RefersTo(ref, DeploymentKind) && !RefersTo(ref, ReplicaSetKind) {
		return "", false
	}
	return ref.UID, true
}

// DeploymentOf returns the name of the Deployment that controls obj (a ReplicaSet): the name in obj's
// ControllerRef when that names a Deployment (RefersTo); "" and false otherwise. It reads only obj, so the
// Deployment may not exist.
func DeploymentOf(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if !RefersTo(ref, DeploymentKind) {
		return "", false
	}
	return ref.Name, true
}

// ReplicaSetOf returns the ReplicaSet that controls pod: the one get (a namespace's lister Get, or any lookup by
// name in pod's namespace) finds under the name of pod's ControllerRef, when that names a ReplicaSet and the
// found ReplicaSet has its UID (Resolve); nil and false otherwise.
func ReplicaSetOf(pod metav1.Object, get func(name string) (*appsv1.ReplicaSet, error)) (*appsv1.ReplicaSet, bool) {
	return Resolve(metav1.GetControllerOfNoCopy(pod), ReplicaSetKind, get)
}

// DeploymentOfPod is the Deployment a pod belongs to: ReplicaSetOf(pod, get), then DeploymentOf that
// ReplicaSet. It returns the ReplicaSet and the Deployment's name; nil, "" and false when either link is
// missing. The rollout metrics, kubedeploy_deployment_unavailable_pods and the shadow check's watcher resolve
// pods with it.
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
