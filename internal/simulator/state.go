package simulator

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// state is what the simulated API server holds of the Deployment at one
// moment: the Deployment, the ReplicaSets it controls (the new one and the
// old ones, oldest first, RV-1) and the namespace's pods.
type state struct {
	d      *appsv1.Deployment
	rss    []*appsv1.ReplicaSet
	newRS  *appsv1.ReplicaSet
	oldRSs []*appsv1.ReplicaSet
	pods   []*v1.Pod
}

// activePods returns rs's pods that are neither Terminating nor ended
// (phase Failed or Succeeded), the pods the ReplicaSet controller counts.
func (st *state) activePods(rs *appsv1.ReplicaSet) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range rolloutstate.ControlledBy(st.pods, rs.UID) {
		if p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded {
			out = append(out, p)
		}
	}
	return out
}

// totals returns the sum of the ReplicaSets' spec.replicas and the number of
// their pods that are not Terminating and available at now (the simulated
// clock's time), by the rule the ReplicaSet controller counts with:
// rolloutstate.PodAvailable with the ReplicaSet's minReadySeconds.
func (st *state) totals(now time.Time) (total, available int32) {
	for _, rs := range st.rss {
		total += rolloutstate.ReplicaSetReplicas(rs)
		minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
		for _, p := range st.activePods(rs) {
			if rolloutstate.PodAvailable(p, minReady, now) {
				available++
			}
		}
	}
	return total, available
}

// observed reports whether the stored status is of the current generation.
func (st *state) observed() bool { return st.d.Status.ObservedGeneration >= st.d.Generation }

// complete reports whether the stored status says the rollout is complete
// (ST-9) for the current generation, with no old pods left.
func (st *state) complete() bool {
	if !st.observed() || !rolloutstate.Complete(st.d, &st.d.Status) {
		return false
	}
	for _, rs := range st.oldRSs {
		if rolloutstate.ReplicaSetReplicas(rs) > 0 || len(st.activePods(rs)) > 0 {
			return false
		}
	}
	return true
}

// held returns the verdict that stops the simulation short of complete:
// held by the partition or by an invalid partition value (EX-1), as
// rolloutstate.VerdictOf judges the stored objects, the same verdict the
// controller's condition, `rollout watch`, observe mode and the metrics give.
// ok is false for any other verdict.
func (st *state) held() (v rolloutstate.Verdict, ok bool) {
	v = rolloutstate.VerdictOf(st.d, st.rss)
	return v, v.Phase == rolloutstate.PhaseHeld || v.Phase == rolloutstate.PhaseInvalid
}

// newPod returns a pod of rs as the ReplicaSet controller makes them: rs's
// template, named after rs, controlled by it.
func newPod(rs *appsv1.ReplicaSet) *v1.Pod {
	t := rs.Spec.Template.DeepCopy()
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: rs.Name + "-", Namespace: rs.Namespace,
			Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Spec: t.Spec,
	}
}
