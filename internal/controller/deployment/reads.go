package deployment

// Every read one sync of the Deployment controller makes: from the informer
// caches, or from the API server (a quorum read) when the IM-4 guard says
// the caches are stale for the key; adoption (claimReplicaSets) is here
// because it decides which ReplicaSets the sync reads as d's. Writes are in
// writes.go.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// getDeployment returns the Deployment from the cache or, when live, from
// the API server (a quorum read; IM-4). It returns the lister's or the API's
// error, NotFound included.
func (c *Controller) getDeployment(ctx context.Context, key cache.ObjectName, live bool) (*appsv1.Deployment, error) {
	if live {
		return c.client.GetDeployment(ctx, key.Namespace, key.Name)
	}
	return c.dLister.Deployments(key.Namespace).Get(key.Name)
}

// listReplicaSets returns the ReplicaSets d could own: from the cache, those
// whose ControllerRef is d plus the orphans (no ControllerRef) in d's
// namespace, read off the controller index, so a sync costs what d owns
// rather than every ReplicaSet of a crowded namespace (issue 10: the
// many-Deployments profile had a third of the Deployment controller's CPU
// here); when live, every ReplicaSet in the namespace from the API server (a
// quorum read; IM-4). ReplicaSets controlled by another owner are left out
// either way by the claim (AD-1), so both give the same claim.
func (c *Controller) listReplicaSets(ctx context.Context, d *appsv1.Deployment, live bool) ([]*appsv1.ReplicaSet, error) {
	if !live {
		return ownership.Candidates[*appsv1.ReplicaSet](c.rsIndexer, d.UID, d.Namespace)
	}
	list, err := c.client.ListReplicaSets(ctx, d.Namespace)
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets in %s from the API server: %w", d.Namespace, err)
	}
	return rolloutstate.Items(list.Items), nil
}

// claimReplicaSets lists the ReplicaSets d could own (listReplicaSets: from
// the cache, or from the API server when live) and returns those d owns after adopting
// matching orphans and releasing owned ones that stopped matching (SD-3,
// AD-1..AD-6); adopted ones as the API server returned them, each adoption
// remembered for IM-4 (IM-2). Any adopt/release error is returned and
// nothing else happens this sync.
func (c *Controller) claimReplicaSets(ctx context.Context, key cache.ObjectName, d *appsv1.Deployment, live bool) ([]*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %v", d.Namespace, d.Name, err)
	}
	all, err := c.listReplicaSets(ctx, d, live)
	if err != nil {
		return nil, err
	}
	claimer := &ownership.Claimer[*appsv1.ReplicaSet]{
		Owner:      d,
		OwnerKind:  controllerKind,
		ObjectKind: "ReplicaSet",
		Selector:   selector,
		CanAdopt: ownership.RecheckDeletionTimestamp(d, "Deployment", func(ctx context.Context) (metav1.Object, error) {
			fresh, err := c.client.GetDeployment(ctx, d.Namespace, d.Name)
			if err != nil {
				return nil, err
			}
			return fresh, nil
		}),
		Patch: func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) (*appsv1.ReplicaSet, error) {
			return c.patchOwnership(ctx, key, rs, patch)
		},
	}
	return claimer.Claim(ctx, all)
}

// resolveTemplates reads as stored (JSON) each of rsList whose template the
// informer could not fully decode (IM-8, rawtemplate.Store.Resolve), so that
// template equality (RV-1) counts the fields kubedeploy's API does not know.
// It returns Resolve's error (the API server's, or ErrStale wrapped).
func (c *Controller) resolveTemplates(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	objs := make([]metav1.Object, len(rsList))
	for i, rs := range rsList {
		objs[i] = rs
	}
	return c.templates.Resolve(ctx, objs...)
}

// pendingCreationsByReplicaSet returns, for each ReplicaSet in rsList with
// creations in flight, the pods the ReplicaSet controller of this process has
// created or is creating for it and not yet observed (Config.PendingCreations);
// nil without that reader or unless d is opted into TerminationComplete, the
// only rule that counts them (EX-3). Read it before the pods: a pod observed
// in between is then counted twice (too many, safe), never missed.
func (c *Controller) pendingCreationsByReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) map[types.UID]int {
	if c.pendingCreations == nil || !waitsForTermination(d) {
		return nil
	}
	var out map[types.UID]int
	for _, rs := range rsList {
		if n := c.pendingCreations(rs.Namespace, rs.Name); n > 0 {
			if out == nil {
				out = map[types.UID]int{}
			}
			out[rs.UID] = n
		}
	}
	return out
}

// podsByReplicaSet returns, for every ReplicaSet in rsList, the cached pods
// whose ControllerRef is that ReplicaSet, whatever their labels or phase (SD-4).
// Every ReplicaSet has an entry, possibly empty.
func (c *Controller) podsByReplicaSet(rsList []*appsv1.ReplicaSet) (map[types.UID][]*v1.Pod, error) {
	out := make(map[types.UID][]*v1.Pod, len(rsList))
	for _, rs := range rsList {
		pods, err := ownership.ByController[*v1.Pod](c.podIndexer, rs.UID)
		if err != nil {
			return nil, err
		}
		out[rs.UID] = pods
	}
	return out, nil
}
