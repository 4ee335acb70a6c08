package deployment

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// unexpectedStrategyError is returned for an unknown strategy type (SD-10).
func unexpectedStrategyError(d *appsv1.Deployment) error {
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// sumSpecReplicas returns Σ spec.replicas over rss (nil entries skipped).
func sumSpecReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += specReplicas(rs)
		}
	}
	return n
}

// sumAvailableWithinSize returns Σ min(spec.replicas, status.availableReplicas)
// over rss: the replicas that stay available once each ReplicaSet's
// controller has caught up with its size.
func sumAvailableWithinSize(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += min(specReplicas(rs), rs.Status.AvailableReplicas)
		}
	}
	return n
}

// activeReplicaSets returns the ReplicaSets with spec.replicas > 0, in order.
func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && specReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// withNew returns oldRSs followed by newRS when it is non-nil, as a new slice.
func withNew(oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, 0, len(oldRSs)+1)
	out = append(out, oldRSs...)
	if newRS != nil {
		out = append(out, newRS)
	}
	return out
}

// sortOldestFirst sorts rss in place by creation time ascending, ties by name
// (RV-1, RU-11, RB-4).
func sortOldestFirst(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return rolloutstate.OlderFirst(rss[i], rss[j]) })
}

// sortNewestFirst sorts rss in place by creation time descending, ties by
// name descending (PS-1).
func sortNewestFirst(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return rolloutstate.OlderFirst(rss[j], rss[i]) })
}

// sortBySizeNewer sorts by spec.replicas descending, ties newest first (PS-3, toAdd > 0).
func sortBySizeNewer(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		if si, sj := specReplicas(rss[i]), specReplicas(rss[j]); si != sj {
			return si > sj
		}
		return rolloutstate.OlderFirst(rss[j], rss[i])
	})
}

// sortBySizeOlder sorts by spec.replicas descending, ties oldest first (PS-3, toAdd < 0).
func sortBySizeOlder(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		if si, sj := specReplicas(rss[i]), specReplicas(rss[j]); si != sj {
			return si > sj
		}
		return rolloutstate.OlderFirst(rss[i], rss[j])
	})
}

// sortByRevision sorts by revision ascending; when either revision does not
// parse or both are equal, oldest first (CL-4).
func sortByRevision(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		ri, erri := revision(rss[i])
		rj, errj := revision(rss[j])
		if erri != nil || errj != nil || ri == rj {
			return rolloutstate.OlderFirst(rss[i], rss[j])
		}
		return ri < rj
	})
}

// findNewReplicaSet returns the oldest ReplicaSet whose template equals d's
// template ignoring pod-template-hash (sameTemplate: unknown fields, as
// templates records them, count), or nil (RV-1). rsList is not modified.
func findNewReplicaSet(templates *rawtemplate.Store, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rsList...)
	sortOldestFirst(sorted)
	for _, rs := range sorted {
		if sameTemplate(templates, rs, d) {
			return rs
		}
	}
	return nil
}

// desiredReplicas returns d.spec.replicas. A nil value (impossible after API
// defaulting, VA-1) is treated as the default, 1 replica.
func desiredReplicas(d *appsv1.Deployment) int32 { return rolloutstate.Replicas(d) }

// specReplicas returns rs.spec.replicas (spec(rs) in the spec). A nil value
// (impossible after API defaulting, VA-2) is treated as the default, 1.
func specReplicas(rs *appsv1.ReplicaSet) int32 { return rolloutstate.ReplicaSetReplicas(rs) }

// isRollingUpdate reports whether d uses the RollingUpdate strategy.
func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}
