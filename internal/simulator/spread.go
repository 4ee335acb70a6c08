package simulator

import (
	"cmp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// placement is where the simulated cluster binds new pods when the Deployment is annotated
// kubedeploy.io/scale-down-spread (EX-4) and State.Nodes gives the nodes: a model of the scheduler's topology
// spread, not the scheduler. A pod goes to the domain (under the annotation's first key) that holds the fewest
// of the pods a spread constraint would count (the Deployment's live pods; those of the pod's own revision
// only when the template's constraint on that key has matchLabelKeys pod-template-hash), then to that
// domain's node with the fewest of the Deployment's pods, ties by name.
type placement struct {
	key         string
	perRevision bool
	nodes       []string          // by name
	domainOf    map[string]string // node name → domain
}

// newPlacement returns d's placement over nodes, or nil when nodes is empty or d has no usable
// kubedeploy.io/scale-down-spread (pods then all run on one simulated node, as without).
func newPlacement(d *appsv1.Deployment, nodes []*v1.Node) *placement {
	keys, err := rolloutstate.ScaleDownSpreadKeys(d.Annotations, &d.Spec.Template)
	if len(nodes) == 0 || err != nil || keys == nil {
		return nil
	}
	p := &placement{key: keys[0], domainOf: map[string]string{}}
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if c.TopologyKey == p.key && slices.Contains(c.MatchLabelKeys, appsv1.DefaultDeploymentUniqueLabelKey) {
			p.perRevision = true
		}
	}
	for _, n := range nodes {
		p.nodes = append(p.nodes, n.Name)
		p.domainOf[n.Name] = rolloutstate.TopologyDomain(n.Labels, p.key)
	}
	slices.Sort(p.nodes)
	return p
}

// live reports whether pod is bound and neither terminating nor finished: what a spread counts.
func live(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// node returns the node to bind pod to, given the Deployment's other pods.
func (p *placement) node(pod *v1.Pod, others []*v1.Pod) string {
	inDomain, onNode := map[string]int{}, map[string]int{}
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	for _, o := range others {
		if !live(o) || o.UID == pod.UID {
			continue
		}
		onNode[o.Spec.NodeName]++
		if !p.perRevision || o.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			inDomain[p.domainOf[o.Spec.NodeName]]++
		}
	}
	return slices.MinFunc(p.nodes, func(a, b string) int {
		return cmp.Or(cmp.Compare(inDomain[p.domainOf[a]], inDomain[p.domainOf[b]]), cmp.Compare(onNode[a], onNode[b]), cmp.Compare(a, b))
	})
}

// spread returns the live pods of pods per domain, every node's domain listed (pods).
func (p *placement) spread(pods []*v1.Pod) map[string]int {
	out := map[string]int{}
	for _, dom := range p.domainOf {
		out[dom] = 0
	}
	for _, pod := range pods {
		if live(pod) {
			dom, ok := p.domainOf[pod.Spec.NodeName]
			if !ok {
				dom = rolloutstate.NoTopologyDomain
			}
			out[dom]++
		}
	}
	return out
}
