// Package podcache decides what of a pod the controllers keep in their informer cache (issue 10: a lean pod
// cache). Both controllers read pods only through the shared pod informer, and only a few fields of each; a
// full pod as the API server sends it (spec with containers, env, volumes, tolerations; status with container
// states and conditions; annotations) takes several KB of heap, so at 10,000 pods the cache would dominate the
// controllers' memory.
//
// Transform is the informer transform that keeps only those fields. A field not kept here reads as its zero
// value in every cached pod, so anything new that reads a pod from the cache must add its field to Transform
// (TestSlimKeepsTheListedFields checks the list; replicaset's TestSlimPodsRankAndCountLikeFullPods checks that
// its readers decide the same on slim pods as on full ones).
package podcache

import (
	"slices"
	"strings"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"
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
//   - restart counts, for the restart rank (RS-14 rule 7), which reads only the highest regular count and the
//     sidecars' counts: of status.containerStatuses the one with the highest restartCount if it is above 0; of
//     spec.initContainers the sidecars (restartPolicy Always: name, restartPolicy); of
//     status.initContainerStatuses the sidecars' with restartCount above 0 (name, restartCount). A zero count
//     and an absent status rank the same.
//
// Pods with equal labels, equal ownerReferences or equal Ready conditions share one map or one slice (the pods of
// a ReplicaSet share the first two, pods that became ready in the same second the third), and namespaces, node
// names and phases are interned (unique.Make): about 0.7 KB less per pod. That is safe because
// nothing writes to a cached object (client-go's rule for informer caches: copy before changing).
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

// Slim returns a new pod with only the fields Transform keeps; pod is not changed. The result may share its
// labels map, ownerReferences slice and strings with pod and with other slim pods: do not modify it.
func Slim(pod *v1.Pod) *v1.Pod {
	out := &v1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         intern(pod.Namespace),
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            sharedLabels(pod.Labels),
			OwnerReferences:   sharedOwnerReferences(pod.OwnerReferences),
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: v1.PodSpec{NodeName: intern(pod.Spec.NodeName)},
		Status: v1.PodStatus{
			Phase: v1.PodPhase(intern(string(pod.Status.Phase))),
		},
	}
	if cost, ok := pod.Annotations[PodDeletionCostAnnotation]; ok {
		out.Annotations = map[string]string{PodDeletionCostAnnotation: cost}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			out.Status.Conditions = sharedReadyCondition(c.Status, c.LastTransitionTime)
			break
		}
	}
	var most *v1.ContainerStatus
	for i, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 && (most == nil || cs.RestartCount > most.RestartCount) {
			most = &pod.Status.ContainerStatuses[i]
		}
	}
	if most != nil {
		out.Status.ContainerStatuses = []v1.ContainerStatus{{Name: intern(most.Name), RestartCount: most.RestartCount}}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		out.Spec.InitContainers = append(out.Spec.InitContainers, v1.Container{Name: intern(c.Name), RestartPolicy: &sidecarPolicy})
		for _, cs := range pod.Status.InitContainerStatuses {
			if cs.Name == c.Name && cs.RestartCount > 0 {
				out.Status.InitContainerStatuses = append(out.Status.InitContainerStatuses, v1.ContainerStatus{Name: intern(cs.Name), RestartCount: cs.RestartCount})
			}
		}
	}
	return out
}

// sidecarPolicy is the one restartPolicy every slim sidecar points to.
var sidecarPolicy = v1.ContainerRestartPolicyAlways

// sharedSets is how many distinct label sets, and ownerReferences lists, are remembered for sharing (about two per
// Deployment mid-rollout); a forgotten one only costs its pods their own copies.
const sharedSets = 4096

var (
	labelSets       = lru.New(sharedSets) // sharedLabels' key → map[string]string
	ownerLists      = lru.New(sharedSets) // sharedOwnerReferences' key → []metav1.OwnerReference
	readyConditions = lru.New(sharedSets) // readyKey → []v1.PodCondition
)

// readyKey identifies a kept Ready condition: its status and lastTransitionTime (which the API carries in whole
// seconds, so pods that became ready in the same second share one).
type readyKey struct {
	status v1.ConditionStatus
	at     int64 // Unix nanoseconds
}

// sharedReadyCondition returns a one-element Conditions slice holding the Ready condition with status and
// lastTransitionTime at, shared with the other pods whose Ready condition is the same.
func sharedReadyCondition(status v1.ConditionStatus, at metav1.Time) []v1.PodCondition {
	key := readyKey{status: status, at: at.UnixNano()}
	if c, ok := readyConditions.Get(key); ok {
		return c.([]v1.PodCondition)
	}
	return share(readyConditions, key, []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionStatus(intern(string(status))), LastTransitionTime: at}})
}

// intern returns s's canonical copy, so that equal strings of many pods take memory once.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// sharedLabels returns a map equal to labels that other pods with the same labels share: the first one seen, or
// labels itself.
func sharedLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		// Label keys and values cannot hold a NUL, so the key is unambiguous.
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return share(labelSets, b.String(), labels)
}

// sharedOwnerReferences returns a slice equal to refs that other pods with the same ownerReferences share.
func sharedOwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	var b strings.Builder
	flag := func(p *bool) byte {
		switch {
		case p == nil:
			return 'n'
		case *p:
			return 't'
		}
		return 'f'
	}
	for _, r := range refs {
		for _, s := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID)} {
			b.WriteString(s)
			b.WriteByte(0)
		}
		b.WriteByte(flag(r.Controller))
		b.WriteByte(flag(r.BlockOwnerDeletion))
	}
	return share(ownerLists, b.String(), slices.Clip(refs))
}

// share returns the value c holds under key, or, if none, adds v under key and returns it.
func share[T any](c *lru.Cache, key lru.Key, v T) T {
	if got, ok := c.Get(key); ok {
		return got.(T)
	}
	c.Add(key, v)
	return v
}
