package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// stepsDeployment is a Deployment of 10 replicas at revision 3, with the steps, its rollout at step
// (0-based) of revision 3.
func stepsDeployment(step int) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2, Annotations: map[string]string{
		rolloutstate.RevisionAnnotation:     "3",
		rolloutstate.RolloutStepsAnnotation: "- setWeight: 20\n- pause: {duration: 12s}\n- setWeight: 50\n- pause: {}\n",
		rolloutstate.RolloutStepAnnotation:  rolloutstate.StepState{Revision: 3, Step: step, Since: metav1.NewTime(time.Unix(0, 0))}.Encode(),
	}}}
	d.Spec.Replicas = new(int32(10))
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 10, UpdatedReplicas: 5, AvailableReplicas: 10}
	return d
}

// EX-5: promote names the revision and the pause step it ends; --full any step; it refuses a setWeight step
// without --full, steps that are done, not started, invalid or missing, and a complete rollout.
func TestPromoteDecision(t *testing.T) {
	value, said, err := promote(stepsDeployment(3), 3, false)
	if err != nil || value != "3/3" || said != "promoted: step 4 of 4 (pause until promoted) of revision 3 ends" {
		t.Errorf("pause {}: %q, %q, %v", value, said, err)
	}
	if value, _, err := promote(stepsDeployment(1), 3, false); err != nil || value != "3/1" {
		t.Errorf("timed pause: %q, %v", value, err)
	}
	if value, said, err := promote(stepsDeployment(2), 3, true); err != nil || value != "3/full" || !strings.Contains(said, "skips steps 3–4") {
		t.Errorf("--full: %q, %q, %v", value, said, err)
	}
	refused := map[string]*appsv1.Deployment{"is not a pause": stepsDeployment(2), "every step of revision 3 is done": stepsDeployment(4)}
	notStarted := stepsDeployment(0)
	notStarted.Annotations[rolloutstate.RolloutStepAnnotation] = rolloutstate.StepState{Revision: 2}.Encode()
	refused["has not started its steps"] = notStarted
	invalid := stepsDeployment(0)
	invalid.Annotations[rolloutstate.RolloutStepsAnnotation] = "- setWeight: 200"
	refused["setWeight 200 is outside 0–100; fix it first"] = invalid
	none := stepsDeployment(0)
	delete(none.Annotations, rolloutstate.RolloutStepsAnnotation)
	refused["no kubedeploy.io/rollout-steps"] = none
	complete := stepsDeployment(3)
	complete.Status.UpdatedReplicas = 10
	refused["revision 3 is complete"] = complete
	for want, d := range refused {
		if _, _, err := promote(d, 3, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("promote: %v, want an error with %q", err, want)
		}
	}
}

// EX-5: abort names the revision, unless its rollout is complete.
func TestAbortDecision(t *testing.T) {
	if value, said, err := abort(stepsDeployment(3), 3); err != nil || value != "3" || !strings.Contains(said, "abort of revision 3 requested") {
		t.Errorf("abort: %q, %q, %v", value, said, err)
	}
	complete := stepsDeployment(3)
	complete.Status.UpdatedReplicas = 10
	if _, _, err := abort(complete, 3); err == nil || !strings.Contains(err.Error(), "is complete") {
		t.Errorf("abort of a complete rollout: %v", err)
	}
}

// EX-5: promote writes through deployments/status; refused that (RBAC with patch on deployments only), it
// patches the Deployment itself.
func TestPatchAnnotationFallsBackWithoutStatusPermission(t *testing.T) {
	d := stepsDeployment(3)
	d.Namespace = "ns"
	for _, forbidStatus := range []bool{false, true} {
		client := fake.NewClientset(d.DeepCopy())
		var subresources []string
		client.PrependReactor("patch", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
			subresources = append(subresources, action.GetSubresource())
			if forbidStatus && action.GetSubresource() == "status" {
				return true, nil, apierrors.NewForbidden(appsv1.Resource("deployments/status"), "web", errors.New("no RBAC"))
			}
			return false, nil, nil
		})
		if err := patchAnnotation(context.Background(), client, d, rolloutstate.RolloutPromoteAnnotation, "3/3"); err != nil {
			t.Fatalf("forbid status %v: %v", forbidStatus, err)
		}
		got, err := client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil || got.Annotations[rolloutstate.RolloutPromoteAnnotation] != "3/3" {
			t.Errorf("forbid status %v: annotations %v, %v", forbidStatus, got.Annotations, err)
		}
		want := []string{"status"}
		if forbidStatus {
			want = []string{"status", ""}
		}
		if !slices.Equal(subresources, want) {
			t.Errorf("forbid status %v: patched %q, want %q", forbidStatus, subresources, want)
		}
	}
}
