// Package podcache decides what of a pod the controllers keep in their informer cache (issue 10: a lean pod
// cache). Both controllers read pods only through the shared pod informer, and only a few fields of each; a
// full pod as the API server sends it (spec with containers, env, volumes, tolerations; status with container
// states and conditions; annotations) takes several KB of heap, so at 10,000 pods the cache would dominate the
// controllers' memory.
//
// Transform is the informer transform that keeps only those fields. A field not kept here reads as its zero
// value in every cached pod, so anything new that reads a pod from the cache must add its field to Transform
// (TestTransformKeepsWhatTheControllersRead lists the readers).
package podcache

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodDeletionCostAnnotation is the one pod annotation the controllers read (RS-14, the
// controller.kubernetes.io/pod-deletion-cost rank).
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Transform is a client-go cache.TransformFunc: it returns, for a *v1.Pod, a new pod holding only what the
// Deployment and ReplicaSet controllers read (listed field by field below), and any other object with its
// managedFields dropped (CM-5). It never fails; a nil pod stays nil; a cache.DeletedFinalStateUnknown passes through unchanged
// (client-go transforms only the objects it stores).
//
// Kept, and who reads it:
//   - name, namespace, UID, resourceVersion: keys, expectations (RS-8..RS-10) and the read-your-writes guard
//     (IM-4), the adopt/release patches (AD-4, AD-5).
//   - labels: selector matching and adoption (AD-1..AD-8), fullyLabeledReplicas (RS-15), pod-template-hash
//     (OM-10).
//   - ownerReferences: the controller index, candidates and adoption (RS-4, AD-1..AD-8).
//   - creationTimestamp, deletionTimestamp: active and terminating pods (RS-4, RS-5), the age rank (RS-14
//     rule 8).
//   - the pod-deletion-cost annotation: RS-14 rule 4.
//   - spec.nodeName: unassigned first and the pods-per-node rank (RS-14 rules 1 and 5).
//   - spec.initContainers' name and restartPolicy: which init containers are sidecars (RS-14 rule 7).
//   - status.phase: active pods (RS-4), the phase rank (RS-14 rule 2), Recreate's old pods running (RC-3, EH-8).
//   - the Ready condition (type, status, lastTransitionTime): ready and available replicas with minReadySeconds
//     (RS-7, RS-15), the ready rank and ready time (RS-14 rules 3 and 6).
//   - status.containerStatuses and initContainerStatuses (name, restartCount): the restart rank (RS-14 rule 7).
func Transform(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		if pod == nil {
			return obj, nil
		}
		return Slim(pod), nil
	}
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m := acc.GetObjectMeta(); m != nil && m.GetManagedFields() != nil {
			m.SetManagedFields(nil)
		}
	}
	return obj, nil
}

// Slim returns a new pod with only the fields Transform keeps; pod is not changed.
func Slim(pod *v1.Pod) *v1.Pod {
	out := &v1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: v1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: v1.PodStatus{
			Phase:                 pod.Status.Phase,
			ContainerStatuses:     restarts(pod.Status.ContainerStatuses),
			InitContainerStatuses: restarts(pod.Status.InitContainerStatuses),
		},
	}
	if cost, ok := pod.Annotations[PodDeletionCostAnnotation]; ok {
		out.Annotations = map[string]string{PodDeletionCostAnnotation: cost}
	}
	for _, c := range pod.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, v1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			out.Status.Conditions = []v1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out
}

// restarts keeps each container status's name and restart count; nil for none.
func restarts(in []v1.ContainerStatus) []v1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = v1.ContainerStatus{Name: cs.Name, RestartCount: cs.RestartCount}
	}
	return out
}
