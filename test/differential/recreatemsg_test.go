package differential

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestRecreateUndoProgressingMessage (ST-13, issue 44): after a Recreate `rollout undo` to an existing ReplicaSet,
// the Progressing message follows a rule both controllers share:
//   - The undo writes no NewReplicaSetCreated (the ReplicaSet exists; FoundNewReplicaSet only when there is no
//     Progressing condition), and the complete shortcut (status.replicas = updatedReplicas with reason
//     NewReplicaSetAvailable) skips the Progressing update; once the old pods are gone that holds for the rest of
//     the Recreate, and SetDeploymentCondition keeps a condition's message while its status and reason stay. So
//     the condition completes with the message it had when the undo began: the second rollout's, naming the
//     ReplicaSet rolled away from, rs(nginx:2.0).
//   - Only if a sync during the undo sets another reason (ReplicaSetUpdated, when it sees the old pods partly
//     gone) is the message rewritten, and it then completes naming rs(nginx:1.0).
//
// Upstream may come to the undo with a stale message: when it loses the second rollout's NewReplicaSetCreated write
// to its own 409 (docs/safety.md), the condition still names rs(nginx:1.0) from the first rollout, and the undo
// keeps that (CI saw this once, 2026-11-28). kubedeploy loses that write only to a real API error, so its message
// at the undo must name rs(nginx:2.0). Each side is checked against the rule by the Progressing conditions its
// Deployment watch saw during the undo, and the final states are compared exactly, except for that one name when
// upstream's came stale to the undo.
func TestRecreateUndoProgressingMessage(t *testing.T) {
	up, our := runBoth(t, func(ctx context.Context, r *run) error {
		d := newDeployment(5, "nginx:1.0")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		if err := r.create(ctx, d); err != nil {
			return err
		}
		if err := r.settle(ctx, "first rollout", "", complete(0)); err != nil {
			return err
		}
		r.rec.mark("second rollout")
		if err := r.setImage(ctx, "nginx:2.0"); err != nil {
			return err
		}
		if err := r.settle(ctx, "second rollout", "", complete(1)); err != nil {
			return err
		}
		r.rec.mark("undo")
		if err := r.undo(ctx, ""); err != nil {
			return err
		}
		return r.settle(ctx, "undo", "final", complete(1))
	})
	checkUndoMessage(t, "upstream", up)
	checkUndoMessage(t, "ours", our)
	sameFinalButName(t, up.snaps["final"], our.snaps["final"])
}

// checkUndoMessage checks one side of TestRecreateUndoProgressingMessage against the rule, from its last two phases
// (the second rollout and the undo).
func checkUndoMessage(t *testing.T, side string, o outcome) {
	t.Helper()
	const (
		previous  = `ReplicaSet "rs(nginx:2.0)" has successfully progressed.`
		rewritten = `ReplicaSet "rs(nginx:1.0)" has successfully progressed.`
	)
	second, undo := o.phases[len(o.phases)-2], o.phases[len(o.phases)-1]
	created := slices.ContainsFunc(second.progressing, func(c condState) bool { return c.Reason == "NewReplicaSetCreated" })
	t.Logf("%s: Progressing during the second rollout %+v; during the undo %+v", side, second.progressing, undo.progressing)
	if side == "ours" && !created {
		t.Errorf("ours: no NewReplicaSetCreated during the second rollout (IM-2: the write is from the Deployment the API server last returned)")
	}
	begin := undo.progressing[0]
	if undo.name != "undo" || begin.Reason != "NewReplicaSetAvailable" {
		t.Errorf("%s: phase %q began with Progressing %+v, want the undo phase beginning with NewReplicaSetAvailable", side, undo.name, begin)
		return
	}
	if side == "ours" && begin.Message != previous {
		t.Errorf("ours: Progressing when the undo began %q, want %q", begin.Message, previous)
	}
	want := begin.Message
	if slices.ContainsFunc(undo.progressing, func(c condState) bool { return c.Reason != "NewReplicaSetAvailable" }) {
		want = rewritten
	}
	if c := progressingCondition(o.snaps["final"]); c.Reason != "NewReplicaSetAvailable" || c.Message != want {
		t.Errorf("%s: Progressing after the undo to rs(nginx:1.0) %s %q, want NewReplicaSetAvailable %q (conditions on the way %+v)",
			side, c.Reason, c.Message, want, undo.progressing)
	}
}

// sameFinalButName compares the two final snapshots exactly, except that their Progressing messages may name
// different ones of rs(nginx:1.0) and rs(nginx:2.0) (see TestRecreateUndoProgressingMessage).
func sameFinalButName(t *testing.T, up, ours snapshot) {
	t.Helper()
	upMsg, ourMsg := progressingCondition(up).Message, progressingCondition(ours).Message
	if upMsg == ourMsg {
		sameExactly(t, "final", up, ours)
		return
	}
	t.Logf("final Progressing messages differ by the timing above: upstream %q, ours %q", upMsg, ourMsg)
	for _, names := range [][2]string{{`"rs(nginx:1.0)"`, `"rs(nginx:2.0)"`}, {`"rs(nginx:2.0)"`, `"rs(nginx:1.0)"`}} {
		if fixed := progressedMessageLag(up, ours, names[0], names[1]); progressingCondition(fixed).Message == ourMsg {
			sameExactly(t, "final", fixed, ours)
			return
		}
	}
	t.Errorf("final Progressing messages: upstream %q, ours %q, want equal but for the ReplicaSet named", upMsg, ourMsg)
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
