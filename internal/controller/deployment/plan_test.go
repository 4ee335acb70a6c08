package deployment

import (
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// fencepostsFor returns d's rolloutstate.Fenceposts, the parse error ignored (invalid
// values count as 0, RU-2), for tests.
func fencepostsFor(d *appsv1.Deployment) rolloutstate.Fenceposts {
	f, _ := rolloutstate.FencepostsOf(d)
	return f
}

// removals returns how many replicas p takes from each ReplicaSet it
// shrinks.
func removals(p plan) map[*appsv1.ReplicaSet]int32 {
	out := map[*appsv1.ReplicaSet]int32{}
	for _, r := range p {
		if n := specReplicas(r.rs) - r.size; n > 0 {
			out[r.rs] = n
		}
	}
	return out
}
