package simulator

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// state is what the simulated API server holds of the Deployment at one
// moment: the Deployment, the ReplicaSets it controls (the new one and the
// old ones, oldest first, RV-1), the namespace's pods and when each pod
// turns Ready or is gone.
type state struct {
	d      *appsv1.Deployment
	rss    []*appsv1.ReplicaSet
	newRS  *appsv1.ReplicaSet
	oldRSs []*appsv1.ReplicaSet
	pods   []*v1.Pod
	times  map[types.UID]*podTimes
}

// activePods returns rs's pods that are not Terminating.
func (st *state) activePods(rs *appsv1.ReplicaSet) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range rolloutstate.ControlledBy(st.pods, rs.UID) {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// totals returns the sum of the ReplicaSets' spec.replicas and the number of
// their pods available at now (Ready for minReadySeconds, not Terminating).
func (st *state) totals(now time.Duration) (total, available int32) {
	for _, rs := range st.rss {
		total += rolloutstate.ReplicaSetReplicas(rs)
		minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
		for _, p := range st.activePods(rs) {
			if t := st.times[p.UID]; t != nil && t.readyAt <= now && t.readyAt+minReady <= now {
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

// held returns why the simulation stops when the stored status shows the
// rollout held by its partition (EX-1: Progressing reason
// RolloutPartitioned), "" otherwise. With no deadline the controller sets no
// Progressing condition (ST-13); final then says that nothing more happens,
// and a partitioned Deployment with pods left to update is held.
func (st *state) held(final bool) string {
	if !st.observed() {
		return ""
	}
	_, partitioned := st.d.Annotations[rolloutstate.RolloutPartitionAnnotation]
	replicas := rolloutstate.Replicas(st.d)
	if progressingReason(st.d) != rolloutstate.RolloutPartitioned &&
		!(final && partitioned && st.d.Status.UpdatedReplicas < replicas) {
		return ""
	}
	return fmt.Sprintf("held by %s: %d of %d pods updated", rolloutstate.RolloutPartitionAnnotation, st.d.Status.UpdatedReplicas, replicas)
}

func progressingReason(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == v1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
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
