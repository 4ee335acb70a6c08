package simulator

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// storedWithFutureField is d's JSON as a newer API server stores it, with the pod-level template field
// someFutureField, which kubedeploy's API does not know (IM-8).
func storedWithFutureField(t *testing.T, d *appsv1.Deployment) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	if err := unstructured.SetNestedField(u.Object, "strict", "spec", "template", "spec", "someFutureField"); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPlanCarriesStoredTemplates (IM-8, RV-1, OM-14): with the Deployment as stored (State.Stored), the simulated
// controller counts the template's unknown field as the controller does: a ReplicaSet whose typed template is
// the Deployment's but lacks the field is not the new one, and the new ReplicaSet's name folds the field in;
// without Stored the same objects plan as typed.
func TestPlanCarriesStoredTemplates(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	rs0, err := SteadyReplicaSet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	rs0.UID = "rs0-uid"
	stored := storedWithFutureField(t, d)
	cases := []struct {
		name   string
		stored []*unstructured.Unstructured
		// newIsOld: the plan takes rs0 as the new ReplicaSet.
		newIsOld bool
	}{
		{"typed", nil, true},
		{"as stored", []*unstructured.Unstructured{stored}, false},
		{"a ReplicaSet of the same name as stored, without the field", []*unstructured.Unstructured{stored, {Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": map[string]any{"name": rs0.Name}}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Simulate(context.Background(), State{Deployment: d.DeepCopy(), ReplicaSets: []*appsv1.ReplicaSet{rs0.DeepCopy()}, Stored: tc.stored}, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Complete {
				t.Fatalf("plan not complete: %s", p.Stopped)
			}
			if tc.newIsOld {
				if len(p.Steps) != 0 {
					t.Errorf("typed: %d steps, want none (rs0 is the new ReplicaSet)", len(p.Steps))
				}
				return
			}
			if p.NewReplicaSet == "" || p.NewReplicaSet == rs0.Name || !slices.Equal(p.OldReplicaSets, []string{rs0.Name}) {
				t.Errorf("new ReplicaSet %q, old %v; want a new name, rs0 %s old", p.NewReplicaSet, p.OldReplicaSets, rs0.Name)
			}
			if got := p.NewReplicaSetSizes(); !slices.Equal(got, []int32{1, 2, 3}) {
				t.Errorf("new sizes %v, want [1 2 3] (maxSurge 1, maxUnavailable 0)", got)
			}
		})
	}
}

// TestPlanRefusesAStoredObjectThatDoesNotConvert: a stored Deployment with a known field of the wrong JSON type is
// an error naming it, not a plan of a guess.
func TestPlanRefusesAStoredObjectThatDoesNotConvert(t *testing.T) {
	d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	stored := storedWithFutureField(t, d)
	if err := unstructured.SetNestedField(stored.Object, "three", "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	_, err := Simulate(context.Background(), State{Deployment: d, Stored: []*unstructured.Unstructured{stored}}, Config{})
	if err == nil || !strings.Contains(err.Error(), "Deployment/nginx as stored") {
		t.Fatalf("err = %v, want one naming Deployment/nginx as stored", err)
	}
}
