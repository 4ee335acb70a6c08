// Package ownership resolves, claims, adopts and releases objects by
// ControllerRef (spec section 10, AD-1..AD-8; EH-5 resolution).
//
// It is the one home of the ControllerRef rule (owner.go): a ControllerRef
// names one of kubedeploy's owners when its kind is the owner's, its
// apiVersion is of the apps group (any version; extensions counts as apps)
// and its UID is the owner's, the owner found by name when it is looked up
// from a cache. RefersTo, Resolve, ControllerUID and the pod → ReplicaSet →
// Deployment walk (ReplicaSetOf, DeploymentOf, DeploymentOfPod) apply it, and
// so do the Claimer and the controller index: both controllers' handlers and
// claims, the rollout metrics, kubedeploy_deployment_unavailable_pods, the
// shadow check and its watcher all judge an ownerReference the same way.
//
// It is shared by the Deployment controller (which claims ReplicaSets) and the
// ReplicaSet controller (which claims pods). It only decides and sends the
// adopt/release patches it is handed a function for; it never lists, creates
// or deletes anything, and it never decides which objects are candidates
// (callers filter, e.g. AD-8's active pods).
package ownership
