package rolloutstate

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestReplicasDefaults (VA-1, VA-2): unset means the API server's default, 1; no ReplicaSet has 0.
func TestReplicasDefaults(t *testing.T) {
	three := int32(3)
	if got := Replicas(&appsv1.Deployment{}); got != 1 {
		t.Errorf("Replicas(unset) = %d, want 1", got)
	}
	if got := Replicas(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &three}}); got != 3 {
		t.Errorf("Replicas(3) = %d", got)
	}
	if got := ReplicaSetReplicas(&appsv1.ReplicaSet{}); got != 1 {
		t.Errorf("ReplicaSetReplicas(unset) = %d, want 1", got)
	}
	if got := ReplicaSetReplicas(&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: &three}}); got != 3 {
		t.Errorf("ReplicaSetReplicas(3) = %d", got)
	}
	if got := ReplicaSetReplicas(nil); got != 0 {
		t.Errorf("ReplicaSetReplicas(nil) = %d, want 0", got)
	}
}

// TestControlledBy (SD-4, AD-*): only a controller reference counts, whatever else owns the object; order is kept.
func TestControlledBy(t *testing.T) {
	yes := true
	rs := func(name string, uid types.UID, controller bool) appsv1.ReplicaSet {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: uid}
		if controller {
			ref.Controller = &yes
		}
		return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{ref}}}
	}
	list := &appsv1.ReplicaSetList{Items: []appsv1.ReplicaSet{
		rs("a", "d1", true), rs("b", "d2", true), rs("c", "d1", false), rs("e", "d1", true), {ObjectMeta: metav1.ObjectMeta{Name: "orphan"}},
	}}
	names := func(rss []*appsv1.ReplicaSet) (out []string) {
		for _, r := range rss {
			out = append(out, r.Name)
		}
		return out
	}
	got := names(ControlledReplicaSets(list, "d1"))
	if len(got) != 2 || got[0] != "a" || got[1] != "e" {
		t.Errorf("ControlledReplicaSets(d1) = %v, want [a e]", got)
	}
	ptrs := []*appsv1.ReplicaSet{&list.Items[4], &list.Items[3], &list.Items[0]}
	if got := names(ControlledBy(ptrs, "d1")); len(got) != 2 || got[0] != "e" || got[1] != "a" {
		t.Errorf("ControlledBy(d1) = %v, want [e a]", got)
	}
	if got := ControlledBy(ptrs, "none"); got != nil {
		t.Errorf("ControlledBy(none) = %v", got)
	}
}

// TestComplete (ST-9): every replica updated and available and nothing more, for an observed generation.
func TestComplete(t *testing.T) {
	three := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: &three}}
	complete := appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 2}
	if !Complete(d, &complete) {
		t.Error("3/3/3 at generation 2: not complete")
	}
	for name, change := range map[string]func(*appsv1.DeploymentStatus){
		"generation not observed": func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 1 },
		"one not updated":         func(s *appsv1.DeploymentStatus) { s.UpdatedReplicas = 2 },
		"one not available":       func(s *appsv1.DeploymentStatus) { s.AvailableReplicas = 2 },
		"an old pod left":         func(s *appsv1.DeploymentStatus) { s.Replicas = 4 },
	} {
		s := complete
		change(&s)
		if Complete(d, &s) {
			t.Errorf("%s: complete", name)
		}
	}
}

// TestNewAndOldReplicaSets (RV-1): the new ReplicaSet is the oldest whose template equals the Deployment's once
// pod-template-hash is ignored, ties on creation time broken by name; the old ones are the rest, oldest first.
func TestNewAndOldReplicaSets(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	template := func(image, hash string) v1.PodTemplateSpec {
		labels := map[string]string{"app": "web"}
		if hash != "" {
			labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		}
		return v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}}}
	}
	rs := func(name, image string, minute int) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))},
			Spec:       appsv1.ReplicaSetSpec{Template: template(image, name)},
		}
	}
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template("web:2", "")}}
	a, b, c, dup := rs("a", "web:1", 0), rs("b", "web:2", 2), rs("c", "web:3", 1), rs("ab", "web:2", 2)
	rss := []*appsv1.ReplicaSet{b, c, dup, a}
	if got := NewReplicaSet(d, rss); got != dup {
		t.Errorf("NewReplicaSet = %v, want ab (same template and age as b, first by name)", got)
	}
	old := OldReplicaSets(rss, dup)
	if len(old) != 3 || old[0] != a || old[1] != c || old[2] != b {
		t.Errorf("OldReplicaSets = %v, want a, c, b (oldest first)", names(old))
	}
	if rss[0] != b || rss[3] != a {
		t.Error("the input slice was reordered")
	}
	if got := NewReplicaSet(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template("web:9", "")}}, rss); got != nil {
		t.Errorf("NewReplicaSet with no matching template = %s, want nil", got.Name)
	}
	if got := OldReplicaSets(rss, nil); len(got) != 4 {
		t.Errorf("OldReplicaSets(nil new) = %v, want all four", names(got))
	}
}

func names(rss []*appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, rs.Name)
	}
	return out
}

// Items aliases a List's Items, in order: a write through a pointer is seen in the list.
func TestItems(t *testing.T) {
	list := []appsv1.ReplicaSet{{}, {}}
	list[0].Name, list[1].Name = "a", "b"
	got := Items(list)
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("Items = %v", got)
	}
	got[1].Name = "c"
	if list[1].Name != "c" {
		t.Errorf("Items copied the objects")
	}
	if len(Items[appsv1.ReplicaSet](nil)) != 0 {
		t.Errorf("Items(nil) not empty")
	}
}
