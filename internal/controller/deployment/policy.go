package deployment

import (
	"context"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// syncPolicyAnnotations patches every ReplicaSet of d whose kubedeploy.io/
// annotations are not what EX-0 wants (setPolicyAnnotations): d's current
// policy annotations and nothing else of kubedeploy's. A Deployment without
// kubedeploy.io/ annotations, whose ReplicaSets carry none, costs no write;
// one whose policy changed costs one metadata patch per ReplicaSet, once. It
// returns the first API error.
func (sc *syncContext) syncPolicyAnnotations(ctx context.Context) error {
	for _, rs := range sc.rsList {
		if !rolloutstate.PolicyAnnotationsDiffer(sc.d, rs.Annotations) {
			continue
		}
		rsCopy := rs.DeepCopy()
		setPolicyAnnotations(sc.d, rsCopy)
		if _, err := sc.patchReplicaSet(ctx, rs, rsCopy); err != nil {
			return err
		}
	}
	return nil
}
