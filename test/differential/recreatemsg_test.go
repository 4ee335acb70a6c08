package differential

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestRecreateUndoKeepsThePreviousMessage (ST-13, issue 44): a Recreate `rollout undo` to an existing ReplicaSet
// writes no NewReplicaSetCreated (the ReplicaSet exists; FoundNewReplicaSet only when there is no Progressing
// condition), and the complete shortcut (status.replicas = updatedReplicas with reason NewReplicaSetAvailable) holds
// all through a Recreate once the old pods are gone, so the condition keeps the previous rollout's message, naming
// the ReplicaSet rolled away from. Upstream's rule, not a lost write: both controllers say it, exactly.
func TestRecreateUndoKeepsThePreviousMessage(t *testing.T) {
	up, our := runBoth(t, func(ctx context.Context, r *run) error {
		d := newDeployment(5, "nginx:1.0")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		if err := r.create(ctx, d); err != nil {
			return err
		}
		if err := r.settle(ctx, "first rollout", "", complete(0)); err != nil {
			return err
		}
		if err := r.setImage(ctx, "nginx:2.0"); err != nil {
			return err
		}
		if err := r.settle(ctx, "second rollout", "", complete(1)); err != nil {
			return err
		}
		if err := r.undo(ctx, ""); err != nil {
			return err
		}
		return r.settle(ctx, "undo", "final", complete(1))
	})
	want := `ReplicaSet "rs(nginx:2.0)" has successfully progressed.`
	for _, o := range []outcome{up, our} {
		if c := progressingCondition(o.snaps["final"]); c.Reason != "NewReplicaSetAvailable" || c.Message != want {
			t.Errorf("Progressing after the undo to rs(nginx:1.0): %s %q, want NewReplicaSetAvailable %q", c.Reason, c.Message, want)
		}
	}
	sameExactly(t, "final", up.snaps["final"], our.snaps["final"])
}

// progressingCondition returns s's Progressing condition (zero when it has none).
func progressingCondition(s snapshot) condState {
	for _, c := range s.Conditions {
		if c.Type == "Progressing" {
			return c
		}
	}
	return condState{}
}
