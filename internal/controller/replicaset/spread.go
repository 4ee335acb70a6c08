package replicaset

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// InvalidScaleDownSpread is the Warning event reason for a ReplicaSet whose
// kubedeploy.io/scale-down-spread value cannot be used (EX-4); its scale-down
// then ranks by RS-14 alone.
const InvalidScaleDownSpread = "InvalidScaleDownSpread"

// unassignedDomain holds pods not yet bound to a node (EX-4). They tie only
// with each other on RS-14 rule 1, so their domain never decides anything.
const unassignedDomain = "<unassigned>"

// nodeLabelsFunc returns the labels of the named node and whether the node is
// known. The controller's is the node informer's cache.
type nodeLabelsFunc func(name string) (map[string]string, bool)

// spread is what an EX-4 scale-down ranks by beyond RS-14's first keys: the
// topology keys and where each node is.
type spread struct {
	keys  []string
	nodes nodeLabelsFunc
}

// domains returns pod's domain under each of s.keys: the node's label value,
// unassignedDomain for a pod on no node, rolloutstate.NoTopologyDomain for a
// node without the label or not known.
func (s spread) domains(pod *v1.Pod) []string {
	out := make([]string, len(s.keys))
	if pod.Spec.NodeName == "" {
		for i := range out {
			out[i] = unassignedDomain
		}
		return out
	}
	labels, _ := s.nodes(pod.Spec.NodeName)
	for i, k := range s.keys {
		out[i] = rolloutstate.TopologyDomain(labels, k)
	}
	return out
}

// domainCounts is, per key, how many active pods of the Deployment each
// domain holds.
type domainCounts []map[string]int

// countDomains counts the active pods of pods and related (deduplicated by
// UID: related normally includes pods) that are bound to a node, by domain
// under each key. Unbound pods are in no domain.
func (s spread) countDomains(pods, related []*v1.Pod) domainCounts {
	counts := make(domainCounts, len(s.keys))
	for i := range counts {
		counts[i] = map[string]int{}
	}
	seen := map[types.UID]bool{}
	for _, p := range slices.Concat(related, pods) {
		if seen[p.UID] || !isPodActive(p) || p.Spec.NodeName == "" {
			continue
		}
		seen[p.UID] = true
		counts.add(s.domains(p), 1)
	}
	return counts
}

// add adds n to the count of each of doms (one per key).
func (c domainCounts) add(doms []string, n int) {
	for i, d := range doms {
		c[i][d] += n
	}
}

// crowdedThan reports whether a pod in domains a sits where the Deployment
// has more pods than one in domains b: the counts compared key by key, the
// first that differs deciding.
func (c domainCounts) crowdedThan(a, b []string) bool {
	for i := range c {
		if ca, cb := c[i][a[i]], c[i][b[i]]; ca != cb {
			return ca > cb
		}
	}
	return false
}

// tiesOnFirstKeys reports whether a and b are equal on RS-14 rules 1-4
// (assigned to a node, phase, readiness, deletion cost): the keys EX-4 never
// overrides.
func tiesOnFirstKeys(a, b rankedPod) bool {
	return (a.pod.Spec.NodeName == "") == (b.pod.Spec.NodeName == "") &&
		phaseOrder(a.pod.Status.Phase) == phaseOrder(b.pod.Status.Phase) &&
		isPodReady(a.pod) == isPodReady(b.pod) &&
		a.cost == b.cost
}

// spreadVictims returns diff pods of ranked (sorted by rankedPodsLess, diff <
// len(ranked)) to delete so that the Deployment's pods stay spread (EX-4).
// Groups of pods that tie on RS-14 rules 1-4 are taken whole, in order, while
// they fit; in the group where diff runs out, each next victim is the pod in
// the most crowded domain (counts of the Deployment's active pods, counting
// the victims already chosen as gone). Removing from the most crowded domain
// each time leaves the smallest skew (max − min pods per domain) the tied pods
// allow. Between domains equally crowded with the Deployment's pods, the one
// holding more of this ReplicaSet's own pods goes first: during a rolling
// update the scheduler puts each new pod where the Deployment has fewest, so
// shrinking the old ReplicaSet evenly is what leaves the new one spread once
// the old is gone. RS-14's order decides the rest.
func (s spread) spreadVictims(ranked []rankedPod, related []*v1.Pod, diff int) []*v1.Pod {
	pods := make([]*v1.Pod, len(ranked))
	for i, r := range ranked {
		pods[i] = r.pod
	}
	counts, own := s.countDomains(pods, related), s.countDomains(pods, nil)
	out := make([]*v1.Pod, 0, diff)
	take := func(p *v1.Pod, doms []string) {
		out = append(out, p)
		if isPodActive(p) && p.Spec.NodeName != "" {
			counts.add(doms, -1)
			own.add(doms, -1)
		}
	}
	before := func(a, b []string) bool {
		return counts.crowdedThan(a, b) || (!counts.crowdedThan(b, a) && own.crowdedThan(a, b))
	}
	for start := 0; len(out) < diff; {
		end := start + 1
		for end < len(ranked) && tiesOnFirstKeys(ranked[start], ranked[end]) {
			end++
		}
		group := ranked[start:end]
		if len(group) <= diff-len(out) {
			for _, r := range group {
				take(r.pod, s.domains(r.pod))
			}
			start = end
			continue
		}
		doms := make([][]string, len(group))
		for i, r := range group {
			doms[i] = s.domains(r.pod)
		}
		taken := make([]bool, len(group))
		for len(out) < diff {
			best := -1
			for i := range group {
				if !taken[i] && (best < 0 || before(doms[i], doms[best])) {
					best = i
				}
			}
			taken[best] = true
			take(group[best].pod, doms[best])
		}
	}
	return out
}
