package differential

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

func progressingMessage(s snapshot) string {
	for _, c := range s.Conditions {
		if c.Type == "Progressing" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

func TestExploreRecreateMessage(t *testing.T) {
	up, our := runBoth(t, func(ctx context.Context, r *run) error {
		d := newDeployment(17, "nginx:1.0")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		if err := r.create(ctx, d); err != nil {
			return err
		}
		if err := r.settle(ctx, "first rollout", "first", complete(0)); err != nil {
			return err
		}
		if err := r.patch(ctx, types.MergePatchType, `{"spec":{"progressDeadlineSeconds":10}}`); err != nil {
			return err
		}
		if err := r.setImage(ctx, "nginx:broken"); err != nil {
			return err
		}
		if err := r.settle(ctx, "deadline", "stuck", progressing("ProgressDeadlineExceeded")); err != nil {
			return err
		}
		if err := r.undo(ctx, ""); err != nil {
			return err
		}
		if err := r.settle(ctx, "undo", "undone", complete(1)); err != nil {
			return err
		}
		if err := r.patch(ctx, types.MergePatchType, `{"spec":{"progressDeadlineSeconds":600}}`); err != nil {
			return err
		}
		for i, img := range []string{"nginx:2.0", "nginx:3.0"} {
			if err := r.setImage(ctx, img); err != nil {
				return err
			}
			if err := r.settle(ctx, img, fmt.Sprintf("image%d", i), complete(2+i)); err != nil {
				return err
			}
		}
		return nil
	})
	for _, name := range []string{"first", "stuck", "undone", "image0", "image1"} {
		t.Logf("%s: upstream %q; ours %q", name, progressingMessage(up.snaps[name]), progressingMessage(our.snaps[name]))
	}
}
