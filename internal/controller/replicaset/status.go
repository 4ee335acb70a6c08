package replicaset

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Condition reasons of the ReplicaFailure condition (RS-17).
const (
	// ReasonFailedCreate is the ReplicaFailure reason when pods were missing.
	ReasonFailedCreate = "FailedCreate"
	// ReasonFailedDelete is the ReplicaFailure reason when pods were in excess.
	ReasonFailedDelete = "FailedDelete"
)

// statusUpdateAttempts is the number of UpdateStatus calls per sync: one
// retry after a GET (RS-18, CM-4).
const statusUpdateAttempts = 2

// replicas returns spec.replicas, treating nil as 1: the API server defaults
// the field to 1 (VA-2), so nil only comes from objects that bypassed
// defaulting (e.g. hand-built test objects).
func replicas(rs *appsv1.ReplicaSet) int { return int(rolloutstate.ReplicaSetReplicas(rs)) }

// calculateStatus returns rs's new status (RS-15..RS-17) from its active
// claimed pods, its terminating count (RS-5; nil keeps the field unset), the
// manageReplicas error (nil when it succeeded or was skipped) and now.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*v1.Pod, terminating *int32, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	status := *rs.Status.DeepCopy()
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	wait := minReady(rs)
	var fullyLabeled, ready, available int32
	for _, p := range pods {
		if templateLabels.Matches(labels.Set(p.Labels)) {
			fullyLabeled++
		}
		if isPodReady(p) {
			ready++
			if isAvailable(p, wait, now) {
				available++
			}
		}
	}
	status.Replicas = int32(len(pods))
	status.FullyLabeledReplicas = fullyLabeled
	status.ReadyReplicas = ready
	status.AvailableReplicas = available
	status.TerminatingReplicas = terminating
	status.ObservedGeneration = rs.Generation // RS-16

	cond := replicaFailureIndex(status.Conditions)
	switch {
	case manageErr != nil && cond < 0:
		reason := ""
		if diff := len(pods) - replicas(rs); diff < 0 {
			reason = ReasonFailedCreate
		} else if diff > 0 {
			reason = ReasonFailedDelete
		}
		status.Conditions = append(status.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             v1.ConditionTrue,
			Reason:             reason,
			Message:            manageErr.Error(),
			LastTransitionTime: metav1.NewTime(now),
		})
	case manageErr == nil && cond >= 0:
		status.Conditions = append(status.Conditions[:cond:cond], status.Conditions[cond+1:]...)
	}
	if len(status.Conditions) == 0 {
		status.Conditions = nil
	}
	return status
}

// minReady returns rs.spec.minReadySeconds as a duration (RS-15).
func minReady(rs *appsv1.ReplicaSet) time.Duration {
	return time.Duration(rs.Spec.MinReadySeconds) * time.Second
}

// isAvailable reports whether a pod is available (RS-15): rolloutstate.PodAvailable, the one rule shadow
// counts with too.
func isAvailable(pod *v1.Pod, minReady time.Duration, now time.Time) bool {
	return rolloutstate.PodAvailable(pod, minReady, now)
}

func replicaFailureIndex(conds []appsv1.ReplicaSetCondition) int {
	for i := range conds {
		if conds[i].Type == appsv1.ReplicaSetReplicaFailure {
			return i
		}
	}
	return -1
}

// statusUnchanged reports whether writing status to rs would change nothing
// (RS-18): counts, terminating (pointer-equal), conditions, and an
// observedGeneration that already equals the generation.
func statusUnchanged(rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) bool {
	old := rs.Status
	return old.Replicas == status.Replicas &&
		old.FullyLabeledReplicas == status.FullyLabeledReplicas &&
		old.ReadyReplicas == status.ReadyReplicas &&
		old.AvailableReplicas == status.AvailableReplicas &&
		equality.Semantic.DeepEqual(old.TerminatingReplicas, status.TerminatingReplicas) &&
		equality.Semantic.DeepEqual(old.Conditions, status.Conditions) &&
		rs.Generation == old.ObservedGeneration
}

// nextAvailableCheck returns when to sync again so a ready pod that is not
// yet available is counted once minReadySeconds have passed (RS-7): the
// earliest Ready lastTransitionTime + minReadySeconds − now (0 if already
// past), or minReadySeconds when no such pod is found. ok is false when no
// wake-up is needed.
func nextAvailableCheck(rs *appsv1.ReplicaSet, pods []*v1.Pod, status appsv1.ReplicaSetStatus, now time.Time) (time.Duration, bool) {
	if rs.Spec.MinReadySeconds <= 0 || status.ReadyReplicas == status.AvailableReplicas {
		return 0, false
	}
	wait := minReady(rs)
	next, found := wait, false
	for _, p := range pods {
		t := podReadyTime(p)
		if !isPodReady(p) || t.IsZero() || isAvailable(p, wait, now) {
			continue
		}
		if d := max(t.Add(wait).Sub(now), 0); !found || d < next {
			next, found = d, true
		}
	}
	return next, true
}

// updateStatus writes status to rs unless nothing changed (RS-18), as a JSON
// patch that replaces the whole status of the object with rs's UID (see
// statusPatch). On failure it GETs the latest ReplicaSet and retries once,
// then returns the last error. It returns the ReplicaSet the API server
// returned (or rs when no write was needed) and records the write for the
// IM-4 guard.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if statusUnchanged(rs, status) {
		return rs, nil
	}
	logger := klog.FromContext(ctx)
	key := keyOf(rs)
	patch, err := statusPatch(rs.UID, status)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		logger.V(4).Info("Updating ReplicaSet status", "replicaSet", klog.KObj(rs),
			"replicas", status.Replicas, "readyReplicas", status.ReadyReplicas,
			"availableReplicas", status.AvailableReplicas, "observedGeneration", status.ObservedGeneration)
		var updated *appsv1.ReplicaSet
		updated, err = c.cfg.Client.PatchReplicaSetStatus(ctx, rs.Namespace, rs.Name, types.JSONPatchType, patch)
		if err == nil {
			c.freshness.Written(key, resourceReplicaSets, updated)
			return updated, nil
		}
		if attempt >= statusUpdateAttempts {
			break
		}
		fresh, getErr := c.cfg.Client.GetReplicaSet(ctx, rs.Namespace, rs.Name)
		if getErr != nil {
			return nil, fmt.Errorf("updating status of ReplicaSet %s: %w (and getting the latest failed: %w)", key, err, getErr)
		}
		if patch, err = statusPatch(fresh.UID, status); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("updating status of ReplicaSet %s: %w", key, err)
}

// statusPatch returns the JSON patch (RFC 6902) that replaces the status of
// the ReplicaSet with uid by status. Only this controller writes ReplicaSet
// status, and its IM-4 guard keeps it from writing from a cache older than
// its own last write, so no resourceVersion precondition is needed: the
// Deployment controller's spec writes in between no longer make it conflict
// (issue 7 counted 49 such 409s in one 1,000-replica rollout). The UID test
// keeps it off a ReplicaSet recreated under the same name.
func statusPatch(uid types.UID, status appsv1.ReplicaSetStatus) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	test := op{Op: "test", Path: "/metadata/uid"} // absent when uid is ""
	if uid != "" {
		test.Value = string(uid)
	}
	return json.Marshal([]op{test, {Op: "add", Path: "/status", Value: status}})
}
