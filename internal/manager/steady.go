package manager

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// steadyIndexers are the caches of a ControllerSet that a bucket's steady pods are counted from (SH-8), each
// indexed by namespace (cache.NamespaceIndex).
type steadyIndexers struct {
	deployments, replicaSets, pods cache.Indexer
}

// steadyIndexers returns the set's Deployment, ReplicaSet and pod caches: the informers its controllers read
// (rawtemplate registers the first two in every set's factory, so asking for them builds nothing new).
func (s *ControllerSet) steadyIndexers() steadyIndexers {
	apps, core := s.factory.Apps().V1(), s.factory.Core().V1()
	return steadyIndexers{
		deployments: apps.Deployments().Informer().GetIndexer(),
		replicaSets: apps.ReplicaSets().Informer().GetIndexer(),
		pods:        core.Pods().Informer().GetIndexer(),
	}
}

// steadyCounts counts, over the namespaces for which in is true, the pods they hold at rest, so that a rollout's
// surge does not change it (SH-8): each Deployment's spec.replicas (1 when unset), each ReplicaSet's not
// controlled by a Deployment, and each pod not controlled by a ReplicaSet (other workloads' pods cost cache
// too); and the namespaces where that is above 0. shard.SteadyByNamespace measures the same from the API
// server.
func steadyCounts(ix steadyIndexers, in func(namespace string) bool) (pods, namespaces int) {
	seen := map[string]bool{}
	for _, idx := range []cache.Indexer{ix.deployments, ix.replicaSets, ix.pods} {
		for _, ns := range idx.ListIndexFuncValues(cache.NamespaceIndex) {
			if seen[ns] || !in(ns) {
				continue
			}
			seen[ns] = true
			if n := steadyIn(ix, ns); n > 0 {
				pods, namespaces = pods+n, namespaces+1
			}
		}
	}
	return pods, namespaces
}

// steadyIn is steadyCounts for one namespace; objects of another type are skipped.
func steadyIn(ix steadyIndexers, ns string) int {
	n := 0
	deployments, _ := ix.deployments.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range deployments {
		if d, ok := o.(*appsv1.Deployment); ok {
			n += int(ptr.Deref(d.Spec.Replicas, 1))
		}
	}
	rss, _ := ix.replicaSets.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range rss {
		if rs, ok := o.(*appsv1.ReplicaSet); ok && !shard.ControlledBy(rs, "Deployment") {
			n += int(ptr.Deref(rs.Spec.Replicas, 1))
		}
	}
	pods, _ := ix.pods.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range pods {
		if p, ok := o.(*v1.Pod); ok && !shard.ControlledBy(p, "ReplicaSet") {
			n++
		}
	}
	return n
}
