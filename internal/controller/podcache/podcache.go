// Package podcache decides what of a pod the controllers keep in their informer cache (issue 10: a lean pod
// cache). Both controllers, and the manager's kubedeploy_deployment_unavailable_pods metric (issue 11), read
// pods only through the shared pod informer, and only a few fields of each; a full pod as the API server sends
// it (spec with containers, env, volumes, tolerations; status with container states and conditions;
// annotations) takes several KB of heap, so at 10,000 pods the cache would dominate the controllers' memory.
//
// Transform is the informer transform that keeps only those fields. A field not kept here reads as its zero
// value in every cached pod, so anything new that reads a pod from the cache must add its field to Transform
// (TestSlimKeepsTheListedFields checks the list; replicaset's TestSlimPodsRankAndCountLikeFullPods checks that
// its readers decide the same on slim pods as on full ones, TestSlimPodsAreUnavailableForTheSameReason that
// unavailable.Of gives the same reasons).
//
// NewClient is the client the pod informers list and watch through: it decodes pods sent as protobuf into only
// the fields Transform keeps, instead of decoding whole pods for Transform to drop most of (issue 48; wire.go,
// TestPartialDecodeSlimsLikeFullDecode).
package podcache

import (
	"slices"
	"strings"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"
)

// PodDeletionCostAnnotation is the one pod annotation the controllers read (RS-14, the
// controller.kubernetes.io/pod-deletion-cost rank).
const PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Transform is a client-go cache.TransformFunc: it returns, for a *v1.Pod, a new pod holding only what the
// Deployment and ReplicaSet controllers read (listed field by field below), for a *v1.Node one with its name,
// UID, resourceVersion and labels only (slimNode), and any other object with its managedFields dropped
// (CM-5). It never fails; a nil pod stays nil; a cache.DeletedFinalStateUnknown passes through unchanged
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
//   - why the pod is not available, for kubedeploy_deployment_unavailable_pods (issue 11: unavailable.Of's
//     reason, not its message): the PodScheduled condition when it is False (type, status, reason); and the
//     container status unavailable.Of would name, the first of status.initContainerStatuses then
//     status.containerStatuses that is waiting with a reason (state.waiting.reason) or terminated with a
//     non-zero exit (state.terminated exitCode and reason). Its state goes on the entry of the same name kept
//     for restart counts, or on an entry of its own (name, restartCount, state); either way the restart rank
//     reads the same counts, since the entry's count is the container's own (no higher than the highest
//     regular count; a non-sidecar init container's count is not read). A healthy pod has neither.
//
// Pods with equal labels, equal ownerReferences or equal kept conditions share one map or one slice (the pods of
// a ReplicaSet share the first two, pods that became ready in the same second, or that are unschedulable for
// the same reason, the third); kept container states are shared by reason (and exit code); namespaces, node
// names, phases, container names and reasons are interned (unique.Make): about 0.7 KB less per pod. That is
// safe because nothing writes to a cached object (client-go's rule for informer caches: copy before changing).
func Transform(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		if pod == nil {
			return obj, nil
		}
		return Slim(pod), nil
	}
	if node, ok := obj.(*v1.Node); ok && node != nil {
		return slimNode(node), nil
	}
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m := acc.GetObjectMeta(); m != nil && m.GetManagedFields() != nil {
			m.SetManagedFields(nil)
		}
	}
	return obj, nil
}

// slimNode returns a new node with only what the ReplicaSet controller reads of it: its name, UID,
// resourceVersion and labels (the topology domains of EX-4's kubedeploy.io/scale-down-spread). A node as the
// API server sends it carries its images, conditions and capacity, several KB each.
func slimNode(node *v1.Node) *v1.Node {
	return &v1.Node{TypeMeta: node.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, Labels: node.Labels,
	}}
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
	out.Status.Conditions = sharedConditions(conditionsKeyOf(pod))
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
	if cs, init := unavailableContainer(pod); cs != nil {
		if init {
			out.Status.InitContainerStatuses = withState(out.Status.InitContainerStatuses, cs)
		} else {
			out.Status.ContainerStatuses = withState(out.Status.ContainerStatuses, cs)
		}
	}
	return out
}

// unavailableContainer returns the container status whose state unavailable.Of names as the reason a pod is
// not available (issue 11): the first, init containers before regular ones, waiting with a reason or
// terminated with a non-zero exit; init tells which list it is in; nil if none is.
func unavailableContainer(pod *v1.Pod) (cs *v1.ContainerStatus, init bool) {
	for i := range pod.Status.InitContainerStatuses {
		if hasUnavailableState(&pod.Status.InitContainerStatuses[i]) {
			return &pod.Status.InitContainerStatuses[i], true
		}
	}
	for i := range pod.Status.ContainerStatuses {
		if hasUnavailableState(&pod.Status.ContainerStatuses[i]) {
			return &pod.Status.ContainerStatuses[i], false
		}
	}
	return nil, false
}

func hasUnavailableState(cs *v1.ContainerStatus) bool {
	w, t := cs.State.Waiting, cs.State.Terminated
	return (w != nil && w.Reason != "") || (t != nil && t.ExitCode != 0)
}

// withState returns kept with cs's state (as much of it as Transform keeps) on the entry named cs.Name, added
// with cs's restartCount if kept has no such entry.
func withState(kept []v1.ContainerStatus, cs *v1.ContainerStatus) []v1.ContainerStatus {
	state := sharedState(cs.State)
	for i := range kept {
		if kept[i].Name == cs.Name {
			kept[i].State = state
			return kept
		}
	}
	return append(kept, v1.ContainerStatus{Name: intern(cs.Name), RestartCount: cs.RestartCount, State: state})
}

// sidecarPolicy is the one restartPolicy every slim sidecar points to.
var sidecarPolicy = v1.ContainerRestartPolicyAlways

// sharedSets is how many distinct label sets, ownerReferences lists, condition lists and container states are
// remembered for sharing, each (about two label sets per Deployment mid-rollout); a forgotten one only costs its
// pods their own copies.
const sharedSets = 4096

var (
	labelSets       = lru.New(sharedSets) // sharedLabels' key → map[string]string
	ownerLists      = lru.New(sharedSets) // sharedOwnerReferences' key → []metav1.OwnerReference
	conditionLists  = lru.New(sharedSets) // conditionsKey → []v1.PodCondition
	containerStates = lru.New(sharedSets) // stateKey → v1.ContainerState
)

// conditionsKey identifies the conditions Transform keeps: the Ready condition's status ("" when the pod has
// none) and lastTransitionTime (which the API carries in whole seconds, so pods that became ready in the same
// second share one), and a False PodScheduled condition's reason.
type conditionsKey struct {
	ready       v1.ConditionStatus
	readyAt     time.Time // in UTC, so that equal instants are equal keys
	unscheduled bool      // PodScheduled is False
	reason      string    // PodScheduled's
}

func conditionsKeyOf(pod *v1.Pod) conditionsKey {
	// The first condition of each type counts, as for unavailable.Of and the ReplicaSet controller.
	var key conditionsKey
	var ready, scheduled bool
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == v1.PodReady && !ready:
			ready, key.ready, key.readyAt = true, c.Status, c.LastTransitionTime.UTC()
		case c.Type == v1.PodScheduled && !scheduled:
			scheduled, key.unscheduled, key.reason = true, c.Status == v1.ConditionFalse, c.Reason
		}
	}
	if !key.unscheduled {
		key.reason = ""
	}
	return key
}

// sharedConditions returns the Conditions slice key describes (nil if it keeps none), shared with the other pods
// with the same key.
func sharedConditions(key conditionsKey) []v1.PodCondition {
	if key == (conditionsKey{}) {
		return nil
	}
	if c, ok := conditionLists.Get(key); ok {
		return c.([]v1.PodCondition)
	}
	var conds []v1.PodCondition
	if key.ready != "" {
		conds = append(conds, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionStatus(intern(string(key.ready))),
			LastTransitionTime: metav1.NewTime(key.readyAt)})
	}
	if key.unscheduled {
		conds = append(conds, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: intern(key.reason)})
	}
	return share(conditionLists, key, slices.Clip(conds))
}

// stateKey identifies a kept container state: waiting with a reason, or terminated with an exit code and reason.
type stateKey struct {
	terminated bool
	exitCode   int32
	reason     string
}

// sharedState returns a ContainerState holding only state's waiting reason or, if it is not waiting with a
// reason, its terminated exit code and reason; its pointers are shared with every kept state of the same key.
func sharedState(state v1.ContainerState) v1.ContainerState {
	var key stateKey
	if w := state.Waiting; w != nil && w.Reason != "" {
		key.reason = w.Reason
	} else if t := state.Terminated; t != nil {
		key = stateKey{terminated: true, exitCode: t.ExitCode, reason: t.Reason}
	}
	if s, ok := containerStates.Get(key); ok {
		return s.(v1.ContainerState)
	}
	if key.terminated {
		return share(containerStates, key, v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: key.exitCode, Reason: intern(key.reason)}})
	}
	return share(containerStates, key, v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: intern(key.reason)}})
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
