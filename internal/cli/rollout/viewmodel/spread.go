package viewmodel

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Spread is how a Deployment annotated kubedeploy.io/scale-down-spread (EX-4) stands across the topology
// domains of its key (the first key for "template"): what the ReplicaSet controller keeps even when it scales
// down.
type Spread struct {
	// Key is the node label key (a topologyKey such as topology.kubernetes.io/zone).
	Key string
	// Domains are every domain a node is in, and rolloutstate.NoTopologyDomain when a pod is on a node without
	// the key, by name.
	Domains []Domain
	// Skew is the most Pods in a domain minus the fewest (pods).
	Skew int
	// Err, when not nil, is why the annotation cannot be used (the controller says so in an event and
	// scales down by the default ranking); Domains are then empty.
	Err error
}

// Domain is one topology domain's live pods of the Deployment: bound to a node there, not terminating, not
// finished.
type Domain struct {
	Name string
	// Pods are the Deployment's (all its ReplicaSets'); New the new ReplicaSet's among them.
	Pods, New int
}

// spreadOf returns the Spread of d over nodes for its pods (those of owned, the ReplicaSets d controls; newRS
// may be nil), or nil when d has no kubedeploy.io/scale-down-spread or nodes is nil.
func spreadOf(d *appsv1.Deployment, owned []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, pods []*v1.Pod, nodes []*v1.Node) *Spread {
	if nodes == nil || d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] == "" {
		return nil
	}
	keys, err := rolloutstate.ScaleDownSpreadKeys(d.Annotations, &d.Spec.Template)
	if err != nil {
		return &Spread{Err: err}
	}
	s := &Spread{Key: keys[0]}
	nodeDomain := map[string]string{}
	counts := map[string]*Domain{}
	for _, n := range nodes {
		dom := rolloutstate.TopologyDomain(n.Labels, s.Key)
		nodeDomain[n.Name] = dom
		if counts[dom] == nil {
			counts[dom] = &Domain{Name: dom}
		}
	}
	for _, rs := range owned {
		for _, p := range rolloutstate.ControlledBy(pods, rs.UID) {
			if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			dom, ok := nodeDomain[p.Spec.NodeName]
			if !ok {
				dom = rolloutstate.NoTopologyDomain
			}
			if counts[dom] == nil {
				counts[dom] = &Domain{Name: dom}
			}
			counts[dom].Pods++
			if rs == newRS {
				counts[dom].New++
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		s.Domains = append(s.Domains, *counts[name])
	}
	lo, hi := -1, 0
	for _, dom := range s.Domains {
		if lo < 0 || dom.Pods < lo {
			lo = dom.Pods
		}
		hi = max(hi, dom.Pods)
	}
	s.Skew = hi - max(lo, 0)
	return s
}

// Line is the spread as one line: "spread over topology.kubernetes.io/zone: zone-a 3 (2 new), zone-b 3, zone-c
// 2; skew 1" (how many are the new ReplicaSet's while old ReplicaSets have pods), or why there is none.
func (s *Spread) Line() string {
	if s.Err != nil {
		return fmt.Sprintf("spread: %v; the default ranking chooses the pods to delete", s.Err)
	}
	old := slices.ContainsFunc(s.Domains, func(d Domain) bool { return d.New < d.Pods })
	parts := make([]string, len(s.Domains))
	for i, d := range s.Domains {
		parts[i] = fmt.Sprintf("%s %d", d.Name, d.Pods)
		if old && d.New > 0 {
			parts[i] += fmt.Sprintf(" (%d new)", d.New)
		}
	}
	return fmt.Sprintf("spread over %s: %s; skew %d", s.Key, strings.Join(parts, ", "), s.Skew)
}
