package rawtemplate

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// deploymentJSON is a Deployment as a newer API server would send it: fields kubedeploy's API does not know in
// the pod template (pod level, container level, nested in a known struct) and, when topLevel, in spec.
func deploymentJSON(t *testing.T, generation int, futureValue string, topLevel bool) *unstructured.Unstructured {
	t.Helper()
	extra := ""
	if topLevel {
		extra = `"someFutureField": "Recreate",`
	}
	raw := `{"apiVersion": "apps/v1", "kind": "Deployment",
	  "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": ` + itoa(generation) + `,
	               "managedFields": [{"manager": "kubectl"}]},
	  "spec": {` + extra + `"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
	    "template": {"metadata": {"labels": {"app": "web"}},
	      "spec": {"someFutureField": {"mode": "` + futureValue + `"},
	        "securityContext": {"futureProfile": {"type": "RuntimeDefault"}},
	        "containers": [{"name": "web", "image": "nginx:1", "futureContainerField": true}]}}},
	  "status": {"futureStatusField": 1}}`
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	return u
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestNoteUnknownFields (IM-8): the JSON Deployment becomes the typed one (no apiVersion/kind, as a typed
// informer's), its pod template is kept as stored, its fingerprint names the three unknown template fields with
// their values, the top-level spec field is unsupported and the status field is neither.
func TestNoteUnknownFields(t *testing.T) {
	ctx := context.Background()
	s := NewStore(klog.Background(), nil)
	out, err := s.Note(deploymentJSON(t, 3, "strict", true))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := out.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("Note returned %T, want *appsv1.Deployment", out)
	}
	if d.Kind != "" || d.APIVersion != "" || d.Spec.Template.Spec.Containers[0].Image != "nginx:1" || d.Generation != 3 {
		t.Errorf("typed Deployment = %+v", d)
	}
	wantFP := "spec.containers[0].futureContainerField=true\n" +
		"spec.securityContext.futureProfile={\"type\":\"RuntimeDefault\"}\n" +
		"spec.someFutureField={\"mode\":\"strict\"}\n"
	if got := s.Fingerprint(d); got != wantFP {
		t.Errorf("Fingerprint = %q, want %q", got, wantFP)
	}
	tmpl, err := s.Template(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Field(tmpl, "spec.someFutureField.mode"); v != "strict" {
		t.Errorf("Template lost spec.someFutureField: %v", tmpl)
	}
	// Template returns a copy: changing it changes nothing noted.
	tmpl["spec"] = nil
	if again, _ := s.Template(ctx, d); again["spec"] == nil {
		t.Error("Template returned the stored map, not a copy")
	}
	fields, err := s.UnsupportedFields(ctx, d)
	if err != nil || !reflect.DeepEqual(fields, []string{"spec.someFutureField"}) {
		t.Errorf("UnsupportedFields = %v, %v; want [spec.someFutureField]", fields, err)
	}
	if got := s.Unsupported(); len(got) != 1 || got[0].Namespace != "ns" || got[0].Name != "web" {
		t.Errorf("Unsupported = %+v", got)
	}
}

// TestKnownTemplateCostsNothing: an object without unknown fields has no template, fingerprint or unsupported
// field, so the controllers take their typed path and the pod-template-hash stays upstream's.
func TestKnownTemplateCostsNothing(t *testing.T) {
	ctx := context.Background()
	s := NewStore(klog.Background(), nil)
	u := deploymentJSON(t, 1, "x", false)
	spec := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	delete(spec, "someFutureField")
	delete(spec, "securityContext")
	delete(spec["containers"].([]any)[0].(map[string]any), "futureContainerField")
	out, err := s.Note(u)
	if err != nil {
		t.Fatal(err)
	}
	d := out.(*appsv1.Deployment)
	tmpl, err := s.Template(ctx, d)
	fields, err2 := s.UnsupportedFields(ctx, d)
	if tmpl != nil || err != nil || s.Fingerprint(d) != "" || fields != nil || err2 != nil {
		t.Errorf("a Deployment without unknown fields: Template %v, %v; Fingerprint %q; UnsupportedFields %v, %v",
			tmpl, err, s.Fingerprint(d), fields, err2)
	}
}

// TestStaleGeneration: once a newer generation was noted, questions about the older one are answered
// with ErrStale, not with the newer object's template; an object never transformed (typed, from a create's
// response) has nothing unknown; Forget drops the entry, tombstones included.
func TestStaleGeneration(t *testing.T) {
	ctx := context.Background()
	s := NewStore(klog.Background(), nil)
	out, err := s.Note(deploymentJSON(t, 1, "a", false))
	if err != nil {
		t.Fatal(err)
	}
	old := out.(*appsv1.Deployment)
	if _, err := s.Note(deploymentJSON(t, 2, "b", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Template(ctx, old); !errors.Is(err, ErrStale) {
		t.Errorf("Template of generation 1 after generation 2: err %v, want ErrStale", err)
	}
	if _, err := s.UnsupportedFields(ctx, old); !errors.Is(err, ErrStale) {
		t.Errorf("UnsupportedFields of generation 1 after generation 2: err %v, want ErrStale", err)
	}
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "u2", Generation: 1}}
	if tmpl, err := s.Template(ctx, other); tmpl != nil || err != nil {
		t.Errorf("Template of an object never seen = %v, %v; want nil, nil", tmpl, err)
	}
	s.Forget(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: old})
	if _, err := s.Template(ctx, old); err != nil {
		t.Errorf("after Forget: %v", err)
	}
	var nilStore *Store
	if tmpl, err := nilStore.Template(ctx, old); tmpl != nil || err != nil || nilStore.Fingerprint(old) != "" || nilStore.Unsupported() != nil {
		t.Error("a nil Store knows of unknown fields")
	}
}

// TestNoteRefusesOthers: a JSON object of another kind is an error, as is one whose known field has the wrong JSON
// type.
func TestNoteRefusesOthers(t *testing.T) {
	s := NewStore(klog.Background(), nil)
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	if _, err := s.Note(cm); err == nil {
		t.Error("Note of a JSON ConfigMap: no error")
	}
	bad := deploymentJSON(t, 1, "x", false)
	bad.Object["spec"].(map[string]any)["replicas"] = "two"
	if _, err := s.Note(bad); err == nil || !strings.Contains(err.Error(), "ns/web") {
		t.Errorf("Note of a Deployment with replicas \"two\": err %v, want one naming ns/web", err)
	}
}

// TestFieldPaths: Field follows the converter's paths through maps and list indexes and refuses what does not lead
// anywhere.
func TestFieldPaths(t *testing.T) {
	obj := map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": 1}, []any{"x", "y"}}}}
	for path, want := range map[string]any{"a.b[0].c": 1, "a.b[1][1]": "y"} {
		if got, ok := Field(obj, path); !ok || got != want {
			t.Errorf("Field(%q) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"a.b[2].c", "a.x", "a.b[0].c.d", "a.b[x]", "a.b[0"} {
		if got, ok := Field(obj, path); ok {
			t.Errorf("Field(%q) = %v, true; want false", path, got)
		}
	}
}

// TestCreatesCarryStoredTemplate (IM-8): ReplicaSetWithTemplate builds the Deployment's template as stored with the
// ReplicaSet's labels (pod-template-hash included), NoteReplicaSet reads the created one back with the Deployment's
// fingerprint, and PodWithTemplateSpec builds a pod with the ReplicaSet template's spec as stored and the pod's own
// metadata: the unknown fields reach the objects sent.
func TestCreatesCarryStoredTemplate(t *testing.T) {
	ctx := context.Background()
	s := NewStore(klog.Background(), nil)
	out, err := s.Note(deploymentJSON(t, 1, "strict", false))
	if err != nil {
		t.Fatal(err)
	}
	d := out.(*appsv1.Deployment)
	stored, err := s.Template(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "rs1", Labels: labels},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: d.Spec.Template.Spec}},
	}
	sent, err := ReplicaSetWithTemplate(rs, stored)
	if err != nil {
		t.Fatal(err)
	}
	if sent.GetKind() != "ReplicaSet" || sent.GetAPIVersion() != "apps/v1" || sent.GetName() != "web-abc" {
		t.Errorf("sent ReplicaSet is %s %s %s", sent.GetAPIVersion(), sent.GetKind(), sent.GetName())
	}
	gotTemplate, _, _ := unstructured.NestedMap(sent.Object, "spec", "template")
	want := deploymentJSON(t, 1, "strict", false)
	wantTemplate, _, _ := unstructured.NestedMap(want.Object, "spec", "template")
	_ = unstructured.SetNestedStringMap(wantTemplate, labels, "metadata", "labels")
	if a, b := mustJSON(t, gotTemplate), mustJSON(t, wantTemplate); a != b {
		t.Errorf("ReplicaSet template as sent:\n%s\nwant the Deployment's as stored plus pod-template-hash:\n%s", a, b)
	}
	sent.SetGeneration(1)
	created, err := s.NoteReplicaSet(sent)
	if err != nil {
		t.Fatal(err)
	}
	if created.Name != "web-abc" || created.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Errorf("created ReplicaSet = %+v", created)
	}
	if s.Fingerprint(created) != s.Fingerprint(d) {
		t.Errorf("the created ReplicaSet's fingerprint %q differs from the Deployment's %q", s.Fingerprint(created), s.Fingerprint(d))
	}
	if _, err := s.NoteReplicaSet(deploymentJSON(t, 1, "strict", false)); err == nil {
		t.Error("NoteReplicaSet of a Deployment: no error")
	}

	rsTemplate, err := s.Template(ctx, created)
	if err != nil || rsTemplate == nil {
		t.Fatalf("Template(created ReplicaSet) = %v, %v", rsTemplate, err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-abc-", Namespace: "ns", Labels: labels}, Spec: rs.Spec.Template.Spec}
	checkPodCarries(t, pod, rsTemplate, wantTemplate)

	back := WithoutLabel(rsTemplate, appsv1.DefaultDeploymentUniqueLabelKey)
	wantBack, _, _ := unstructured.NestedMap(want.Object, "spec", "template")
	if a, b := mustJSON(t, back), mustJSON(t, wantBack); a != b {
		t.Errorf("WithoutLabel(ReplicaSet template) = %s, want the Deployment's as stored %s", a, b)
	}
}

// checkPodCarries builds pod with PodWithTemplateSpec from rsTemplate and checks that the pod to send has
// wantTemplate's spec, unknown fields included, and pod's pod-template-hash label "abc"; PodFrom reads it back typed.
func checkPodCarries(t *testing.T, pod *v1.Pod, rsTemplate, wantTemplate map[string]any) {
	t.Helper()
	sent, err := PodWithTemplateSpec(pod, rsTemplate)
	if err != nil {
		t.Fatal(err)
	}
	gotSpec, _, _ := unstructured.NestedMap(sent.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(wantTemplate, "spec")
	if a, b := mustJSON(t, gotSpec), mustJSON(t, wantSpec); a != b {
		t.Errorf("pod spec as sent:\n%s\nwant the ReplicaSet template's as stored:\n%s", a, b)
	}
	if l := sent.GetLabels(); l[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" || sent.GetKind() != "Pod" || sent.GetGenerateName() != "web-abc-" {
		t.Errorf("pod as sent: kind %q, generateName %q, labels %v", sent.GetKind(), sent.GetGenerateName(), sent.GetLabels())
	}
	typed, err := PodFrom(sent)
	if err != nil {
		t.Fatal(err)
	}
	if typed.Spec.Containers[0].Image != "nginx:1" || typed.GenerateName != "web-abc-" {
		t.Errorf("PodFrom = %+v", typed)
	}
}

// TestCarry (IM-8): a typed object changed in memory (the image) is answered with the stored object's unknown
// fields where their parents still are: pod level, container level, nested; a field of a container the typed
// object no longer has is dropped; a nil stored object carries nothing.
func TestCarry(t *testing.T) {
	stored := deploymentJSON(t, 1, "strict", false)
	typed := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, typed); err != nil {
		t.Fatal(err)
	}
	typed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	u, err := Carry(typed, stored.Object)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Deployment" || u.GetAPIVersion() != "apps/v1" {
		t.Errorf("Carry gave %s %s", u.GetAPIVersion(), u.GetKind())
	}
	for path, want := range map[string]any{
		"spec.template.spec.containers[0].image":                "nginx:2",
		"spec.template.spec.containers[0].futureContainerField": true,
		"spec.template.spec.someFutureField.mode":               "strict",
		"spec.template.spec.securityContext.futureProfile.type": "RuntimeDefault",
		"status.futureStatusField":                              int64(1),
	} {
		if got, ok := Field(u.Object, path); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v (%v), want %v", path, got, ok, want)
		}
	}
	s := NewStore(klog.Background(), nil)
	if _, err := s.Note(u); err != nil {
		t.Fatal(err)
	}
	if fp := s.Fingerprint(typed); !strings.Contains(fp, "someFutureField") {
		t.Errorf("fingerprint of the carried Deployment = %q", fp)
	}

	typed.Spec.Template.Spec.Containers = nil
	u, err = Carry(typed, stored.Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Field(u.Object, "spec.template.spec.someFutureField"); !ok {
		t.Error("the pod-level field was dropped with the containers")
	}
	if plain, err := Carry(typed, nil); err != nil || plain.GetKind() != "Deployment" {
		t.Errorf("Carry(typed, nil) = %v, %v", plain, err)
	}
	if _, err := Carry(&unstructured.Unstructured{}, nil); err == nil {
		t.Error("Carry of an object of no known kind: no error")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
