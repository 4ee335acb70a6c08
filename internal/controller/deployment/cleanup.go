package deployment

import (
	"context"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"
)

// replicaSetsToDelete returns the old ReplicaSets that history cleanup
// deletes (CL-2..CL-5): among the old ReplicaSets not being deleted, ordered
// by revision, the first len−revisionHistoryLimit are examined and each is
// deleted only if it is fully scaled down and its status is current.
func replicaSetsToDelete(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	limit := d.Spec.RevisionHistoryLimit
	if limit == nil || *limit == math.MaxInt32 {
		return nil
	}
	var candidates []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			candidates = append(candidates, rs)
		}
	}
	diff := len(candidates) - int(*limit)
	if diff <= 0 {
		return nil
	}
	sortByRevision(candidates)
	var out []*appsv1.ReplicaSet
	for _, rs := range candidates[:diff] {
		if rs.Status.Replicas != 0 || specReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		out = append(out, rs)
	}
	return out
}

// cleanupDeployment deletes old ReplicaSets beyond revisionHistoryLimit
// (section 9). NotFound is ignored; any other error stops it and is returned.
func (sc *syncContext) cleanupDeployment(ctx context.Context) error {
	for _, rs := range replicaSetsToDelete(sc.d, sc.oldRSs) {
		sc.logger.V(4).Info("Deleting old replica set", "replicaSet", klog.KObj(rs))
		if err := sc.deleteReplicaSet(ctx, rs); err != nil {
			return err
		}
	}
	return nil
}
