package deployment

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// written remembers obj, returned by a create, update or patch of resource,
// for the IM-4 guard.
func (sc *syncContext) written(resource string, obj metav1.Object) {
	sc.c.freshness.Written(sc.key.String(), resource, obj)
}

// updateStatus writes d's status (UpdateStatus) for the sync of key,
// remembers the write for the IM-4 guard, and returns the Deployment the API
// server stored or the API error.
func (c *Controller) updateStatus(ctx context.Context, key cache.ObjectName, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	updated, err := c.client.UpdateDeploymentStatus(ctx, d)
	if err != nil {
		return nil, err
	}
	c.freshness.Written(key.String(), resourceDeployments, updated)
	return updated, nil
}

// patchOwnership applies an ownership patch (adopt or release, AD-1..AD-6;
// a strategic-merge patch built by package ownership) to rs for the sync of
// key, remembers the write for the IM-4 guard, and returns the ReplicaSet
// the API server stored (IM-2) or the API error.
func (c *Controller) patchOwnership(ctx context.Context, key cache.ObjectName, rs *appsv1.ReplicaSet, patch []byte) (*appsv1.ReplicaSet, error) {
	patched, err := c.client.PatchReplicaSet(ctx, rs.Namespace, rs.Name, types.StrategicMergePatchType, patch)
	if err != nil {
		return nil, err
	}
	c.freshness.Written(key.String(), resourceReplicaSets, patched)
	return patched, nil
}

// writeStatus writes sc.d's status (Controller.updateStatus) and continues
// from the returned Deployment (IM-2). It returns the API error.
func (sc *syncContext) writeStatus(ctx context.Context) error {
	updated, err := sc.c.updateStatus(ctx, sc.key, sc.d)
	if err != nil {
		return err
	}
	sc.d = updated
	return nil
}

// create creates rs (RV-9) and remembers the write for the IM-4 guard. With
// stored, d's pod template as stored (IM-8: it has fields kubedeploy's API
// does not know; stored is changed), rs is sent as JSON with that template in
// place of its own (rawtemplate.ReplicaSetWithTemplate, Client's
// CreateReplicaSetUnstructured), so that those fields reach the ReplicaSet,
// and the store notes the created one's template. It returns the ReplicaSet
// the API server stored or the API error (AlreadyExists included, which
// createReplicaSet resolves).
func (sc *syncContext) create(ctx context.Context, rs *appsv1.ReplicaSet, stored map[string]any) (*appsv1.ReplicaSet, error) {
	var created *appsv1.ReplicaSet
	var err error
	if stored != nil {
		created, err = sc.createAsStored(ctx, rs, stored)
	} else {
		created, err = sc.c.client.CreateReplicaSet(ctx, rs)
	}
	if err != nil {
		return nil, err
	}
	sc.written(resourceReplicaSets, created)
	return created, nil
}

// createAsStored sends rs with stored as its pod template and returns the
// created ReplicaSet, typed, as the store notes it (IM-8).
func (sc *syncContext) createAsStored(ctx context.Context, rs *appsv1.ReplicaSet, stored map[string]any) (*appsv1.ReplicaSet, error) {
	u, err := rawtemplate.ReplicaSetWithTemplate(rs, stored)
	if err != nil {
		return nil, err
	}
	created, err := sc.c.client.CreateReplicaSetUnstructured(ctx, u)
	if err != nil {
		return nil, err
	}
	return sc.c.templates.NoteReplicaSet(created)
}

// patchDeployment applies change to a copy of sc.d and writes what it
// changed as a conditioned JSON patch (deploymentPatch): it names only those
// fields and keeps every other field as stored, fields kubedeploy's compiled
// API does not know included (IM-8: a Deployment is never written whole). It
// continues from the returned Deployment (IM-2); a change that changes
// nothing writes nothing. A refused precondition (the Deployment was
// recreated or its spec changed since it was read) is returned as a
// runner.ErrConflict, so the sync is retried on fresh data; other API
// errors as they are.
func (sc *syncContext) patchDeployment(ctx context.Context, change func(d *appsv1.Deployment)) error {
	return sc.writeDeploymentPatch(ctx, change, nil)
}

// patchDeploymentToTemplateOf is patchDeployment that also gives d rs's pod
// template without pod-template-hash (RB-5, EX-2): the template as the API
// server stored it when it has fields kubedeploy's API does not know (IM-8),
// so that a rollback restores them. change must leave the template alone.
// Besides patchDeployment's errors it returns rawtemplate.ErrStale (wrapped)
// when rs is not the generation last seen.
func (sc *syncContext) patchDeploymentToTemplateOf(ctx context.Context, rs *appsv1.ReplicaSet, change func(d *appsv1.Deployment)) error {
	stored, err := sc.c.templates.Template(ctx, rs)
	if err != nil {
		return err
	}
	if stored != nil {
		return sc.writeDeploymentPatch(ctx, change, rawtemplate.WithoutLabel(stored, appsv1.DefaultDeploymentUniqueLabelKey))
	}
	template := rs.Spec.Template.DeepCopy()
	delete(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return sc.writeDeploymentPatch(ctx, change, template)
}

// writeDeploymentPatch is patchDeployment writing template (when not nil) as
// the pod template (deploymentPatch).
func (sc *syncContext) writeDeploymentPatch(ctx context.Context, change func(d *appsv1.Deployment), template any) error {
	modified := sc.d.DeepCopy()
	change(modified)
	patch, err := deploymentPatch(sc.d, modified, template)
	if err != nil || patch == nil {
		return err
	}
	updated, err := sc.c.client.PatchDeployment(ctx, sc.d.Namespace, sc.d.Name, types.JSONPatchType, patch)
	if err != nil {
		if preconditionFailed(err) {
			return fmt.Errorf("deployment %s was recreated or its spec changed since it was read, so the conditioned patch was refused; retrying on fresh data: %w: %w",
				klog.KObj(sc.d), runner.ErrConflict, err)
		}
		return err
	}
	sc.written(resourceDeployments, updated)
	sc.d = updated
	return nil
}

// preconditionFailed reports whether err is kube-apiserver's answer to a JSON
// patch whose test failed: a bare 422 Invalid without causes (a validation
// error lists its causes).
func preconditionFailed(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsInvalid(err) && errors.As(err, &status) &&
		(status.Status().Details == nil || len(status.Status().Details.Causes) == 0)
}

// deleteReplicaSet deletes rs (history cleanup, CL-1) and remembers the
// delete for the IM-4 guard. NotFound counts as success; other API errors
// are returned.
func (sc *syncContext) deleteReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	err := sc.c.client.DeleteReplicaSet(ctx, rs.Namespace, rs.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	sc.c.freshness.Deleted(sc.key.String(), resourceReplicaSets, rs)
	return nil
}

// replaceReplicaSet puts updated (returned by the API server) in place of the
// ReplicaSet with the same UID in the context (IM-2) and remembers the write
// for IM-4.
func (sc *syncContext) replaceReplicaSet(updated *appsv1.ReplicaSet) {
	sc.written(resourceReplicaSets, updated)
	swap := func(rss []*appsv1.ReplicaSet) {
		for i, rs := range rss {
			if rs != nil && rs.UID == updated.UID {
				rss[i] = updated
			}
		}
	}
	swap(sc.rsList)
	swap(sc.oldRSs)
	if sc.newRS != nil && sc.newRS.UID == updated.UID {
		sc.newRS = updated
	}
}

// patchReplicaSet writes modified, a changed copy of orig (a ReplicaSet in
// the context), as a JSON patch conditioned on orig's UID and generation and
// on tests (see replicaSetPatch), and continues from the result (IM-2). It
// returns the stored ReplicaSet (orig when nothing differs) or the API error;
// a failed precondition (422) is explained by explainPatchError, and the sync
// is retried on a fresh cache.
func (sc *syncContext) patchReplicaSet(ctx context.Context, orig, modified *appsv1.ReplicaSet, tests ...jsonPatchOp) (*appsv1.ReplicaSet, error) {
	patch, err := replicaSetPatch(orig, modified, tests...)
	if err != nil || patch == nil {
		return orig, err
	}
	updated, err := sc.c.client.PatchReplicaSet(ctx, orig.Namespace, orig.Name, types.JSONPatchType, patch)
	if err != nil {
		return nil, sc.explainPatchError(ctx, orig, err)
	}
	sc.replaceReplicaSet(updated)
	return updated, nil
}

// explainPatchError turns a failed precondition of a ReplicaSet patch into an
// error that says what changed. kube-apiserver answers a failed JSON patch
// test with a bare 422 ("the server rejected our request due to an error in
// our request", no causes), so this reads the ReplicaSet once to compare it
// with orig: recreated (UID), spec changed (generation) or availability
// changed. Other errors, validation errors with causes included, are
// returned as they are.
func (sc *syncContext) explainPatchError(ctx context.Context, orig *appsv1.ReplicaSet, err error) error {
	if !preconditionFailed(err) {
		return err
	}
	what := "it could not be read again"
	if fresh, getErr := sc.c.client.GetReplicaSet(ctx, orig.Namespace, orig.Name); getErr == nil {
		what = replicaSetChange(orig, fresh)
	}
	return fmt.Errorf("ReplicaSet %s changed since it was read (%s), so the conditioned patch was refused; retrying on fresh data: %w: %w",
		klog.KObj(orig), what, runner.ErrConflict, err)
}

// replicaSetChange describes how fresh differs from orig in what a ReplicaSet
// patch tests.
func replicaSetChange(orig, fresh *appsv1.ReplicaSet) string {
	switch {
	case fresh.UID != orig.UID:
		return "it was deleted and recreated"
	case fresh.Generation != orig.Generation:
		return fmt.Sprintf("its spec changed: generation %d, was %d", fresh.Generation, orig.Generation)
	case fresh.Status.AvailableReplicas != orig.Status.AvailableReplicas:
		return fmt.Sprintf("availableReplicas is %d, was %d", fresh.Status.AvailableReplicas, orig.Status.AvailableReplicas)
	}
	return "its annotations changed"
}
