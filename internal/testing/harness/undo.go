package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// ErrUndoSkipped is returned (wrapped) by RolloutUndo when the Deployment's
// template already equals the target revision's, ignoring pod-template-hash:
// kubectl then prints "skipped rollback" and writes nothing, and so does
// RolloutUndo. A caller that accepts this as kubectl does tests it with errors.Is.
var ErrUndoSkipped = errors.New("skipped rollback: current template already matches the revision")

// undoKeptAnnotations are the annotations `kubectl rollout undo` keeps from
// the Deployment and never copies from the ReplicaSet (kubectl's
// annotationsToSkip in k8s.io/kubectl/pkg/polymorphichelpers; RB-6, RB-9).
var undoKeptAnnotations = map[string]bool{
	v1.LastAppliedConfigAnnotation:         true,
	rolloutstate.RevisionAnnotation:        true,
	rolloutstate.RevisionHistoryAnnotation: true,
	rolloutstate.DesiredReplicasAnnotation: true,
	rolloutstate.MaxReplicasAnnotation:     true,
	appsv1.DeprecatedRollbackTo:            true,
}

// RolloutUndo does what `kubectl rollout undo deployment/name
// [--to-revision=toRevision]` does in namespace ns (RB-9), mirroring kubectl's
// DeploymentRollbacker (k8s.io/kubectl/pkg/polymorphichelpers) step by step:
//
//   - it reads the Deployment and lists the ReplicaSets matching its selector
//     whose ControllerRef is the Deployment (live reads, no cache);
//   - toRevision 0 means the previous revision: the ReplicaSet with the
//     second-highest deployment.kubernetes.io/revision (a ReplicaSet without
//     the annotation counts as revision 0; one whose annotation does not parse
//     is ignored). toRevision > 0 is that revision exactly;
//   - it refuses a paused Deployment, and writes nothing when the Deployment's
//     template already equals that ReplicaSet's ignoring pod-template-hash;
//   - otherwise it sends one JSON patch replacing /spec/template with the
//     ReplicaSet's template without the pod-template-hash label, and
//     /metadata/annotations with the Deployment's kept annotations
//     (last-applied-configuration, revision, revision-history,
//     desired-replicas, max-replicas, deprecated rollback-to) plus every other
//     annotation of the ReplicaSet (so kubernetes.io/change-cause comes from
//     the ReplicaSet, and Deployment annotations it lacks are dropped).
//
// It returns the patched Deployment. Errors: the API error of the read, list
// or patch (wrapped, so apierrors predicates work); "unable to find specified
// revision N in history" for a negative toRevision or one no ReplicaSet has;
// "no rollout history found" when toRevision is 0 and there is no previous
// revision; "cannot roll back a paused deployment" when spec.paused is set;
// ErrUndoSkipped (wrapped) when the template already matches. Unlike kubectl
// it does no client-side dry run and takes no extra annotations.
func RolloutUndo(ctx context.Context, client kubernetes.Interface, ns, name string, toRevision int64) (*appsv1.Deployment, error) {
	if toRevision < 0 {
		return nil, fmt.Errorf("rollout undo %s/%s: unable to find specified revision %d in history", ns, name, toRevision)
	}
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("rollout undo %s/%s: %w", ns, name, err)
	}
	rs, err := undoTarget(ctx, client, d, toRevision)
	if err != nil {
		return nil, fmt.Errorf("rollout undo %s/%s: %w", ns, name, err)
	}
	if d.Spec.Paused {
		return nil, fmt.Errorf("rollout undo %s/%s: cannot roll back a paused deployment; resume it first", ns, name)
	}
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	current := d.Spec.Template.DeepCopy()
	delete(current.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if apiequality.Semantic.DeepEqual(tmpl, current) {
		return nil, fmt.Errorf("rollout undo %s/%s to revision %d: %w", ns, name, toRevision, ErrUndoSkipped)
	}
	body, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/spec/template", "value": tmpl},
		{"op": "replace", "path": "/metadata/annotations", "value": undoAnnotations(d.Annotations, rs.Annotations)},
	})
	if err != nil {
		return nil, fmt.Errorf("rollout undo %s/%s: %w", ns, name, err)
	}
	out, err := client.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("rollout undo %s/%s: restoring revision %d: %w", ns, name, toRevision, err)
	}
	return out, nil
}

// undoTarget returns d's ReplicaSet that `kubectl rollout undo
// --to-revision=toRevision` restores (toRevision 0: the previous revision).
func undoTarget(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, toRevision int64) (*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := client.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var latest, previous *appsv1.ReplicaSet
	latestRev, previousRev := int64(-1), int64(-1)
	for i := range list.Items {
		rs := &list.Items[i]
		if !metav1.IsControlledBy(rs, d) {
			continue
		}
		rev, err := revisionOf(rs)
		if err != nil {
			continue
		}
		switch {
		case toRevision > 0:
			if rev == toRevision {
				return rs, nil
			}
		case rev > latestRev:
			previous, previousRev = latest, latestRev
			latest, latestRev = rs, rev
		case rev > previousRev:
			previous, previousRev = rs, rev
		}
	}
	if toRevision > 0 {
		return nil, fmt.Errorf("unable to find specified revision %d in history", toRevision)
	}
	if previous == nil {
		return nil, fmt.Errorf("no rollout history found for deployment %q", d.Name)
	}
	return previous, nil
}

// revisionOf returns rs's deployment.kubernetes.io/revision, 0 when absent,
// or the parse error.
func revisionOf(rs *appsv1.ReplicaSet) (int64, error) {
	v, ok := rs.Annotations[rolloutstate.RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// undoAnnotations returns the annotations `kubectl rollout undo` writes: the
// Deployment's kept ones plus every other one of the ReplicaSet.
func undoAnnotations(deployment, replicaSet map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range deployment {
		if undoKeptAnnotations[k] {
			out[k] = v
		}
	}
	for k, v := range replicaSet {
		if !undoKeptAnnotations[k] {
			out[k] = v
		}
	}
	return out
}
