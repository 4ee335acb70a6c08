package deployment

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jsonPatchOp is one RFC 6902 operation. A nil Value in a "test" means the
// field must be absent (how a zero omitempty field is stored).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// testInt returns a test that the integer at path is v; 0 is tested as
// absent, since every field tested here is omitempty.
func testInt(path string, v int64) jsonPatchOp {
	if v == 0 {
		return jsonPatchOp{Op: "test", Path: path}
	}
	return jsonPatchOp{Op: "test", Path: path, Value: v}
}

// testString returns a test that the string at path is v; "" is tested as
// absent (omitempty).
func testString(path, v string) jsonPatchOp {
	if v == "" {
		return jsonPatchOp{Op: "test", Path: path}
	}
	return jsonPatchOp{Op: "test", Path: path, Value: v}
}

// availableUnchanged is the extra precondition of an RU-11 scale-down: the
// ReplicaSet's status.availableReplicas is still what the decision read.
func availableUnchanged(rs *appsv1.ReplicaSet) jsonPatchOp {
	return testInt("/status/availableReplicas", int64(rs.Status.AvailableReplicas))
}

// replicaSetPatch returns the JSON patch (RFC 6902) that gives orig
// modified's annotations, spec.replicas and spec.minReadySeconds (the only
// fields the Deployment controller changes on an existing ReplicaSet, RV-2
// and RU-15). It first tests that the stored object is still orig's (UID),
// with orig's spec (metadata.generation), then the extra tests. So, unlike an
// Update on orig's resourceVersion, it does not fail when only the
// ReplicaSet controller's status writes happened in between (IM-2), yet it
// fails (422) when the spec, or what extra tests name, changed. It returns
// nil when nothing differs.
func replicaSetPatch(orig, modified *appsv1.ReplicaSet, extra ...jsonPatchOp) ([]byte, error) {
	var ops []jsonPatchOp
	ops = append(ops, annotationOps(orig.Annotations, modified.Annotations)...)
	if specReplicas(orig) != specReplicas(modified) || orig.Spec.Replicas == nil {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/replicas", Value: specReplicas(modified)})
	}
	if orig.Spec.MinReadySeconds != modified.Spec.MinReadySeconds {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/minReadySeconds", Value: modified.Spec.MinReadySeconds})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(append(append(sameSpecTests(&orig.ObjectMeta), extra...), ops...))
}

// annotationOps returns the operations that turn annotations from into to:
// when from is empty, a test that the map is absent and one add of the whole
// map (so annotations written meanwhile by others are never overwritten
// unseen); otherwise one add or remove per changed key, in key order.
func annotationOps(from, to map[string]string) []jsonPatchOp {
	if maps.Equal(from, to) {
		return nil
	}
	if len(from) == 0 {
		return []jsonPatchOp{{Op: "test", Path: "/metadata/annotations"}, {Op: "add", Path: "/metadata/annotations", Value: to}}
	}
	var ops []jsonPatchOp
	for _, k := range slices.Sorted(maps.Keys(to)) {
		if v, ok := from[k]; !ok || v != to[k] {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(k), Value: to[k]})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(from)) {
		if _, ok := to[k]; !ok {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: "/metadata/annotations/" + escapePointer(k)})
		}
	}
	return ops
}

// escapePointer escapes a JSON pointer token (RFC 6901): "~" as "~0", "/" as "~1".
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// deploymentPatch returns the JSON patch (RFC 6902) that gives orig
// modified's annotations and, when it differs, modified's pod template
// (rollback, RB-5/RB-6 and EX-2: the only Deployment fields outside status the
// controller writes); template, when not nil, is written as the pod template
// instead, whatever modified's is (a ReplicaSet's template as stored, IM-8).
// It first tests that the stored object is still orig's
// (UID) with orig's spec (metadata.generation), so a rollback decided on a
// template the user has changed since is refused (422) rather than written
// over it. Fields the patch does not name stay as stored, fields unknown to
// kubedeploy's compiled API included (IM-8). It returns nil when nothing
// differs.
func deploymentPatch(orig, modified *appsv1.Deployment, template any) ([]byte, error) {
	ops := annotationOps(orig.Annotations, modified.Annotations)
	switch {
	case template != nil:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/template", Value: template})
	case !equality.Semantic.DeepEqual(orig.Spec.Template, modified.Spec.Template):
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/template", Value: modified.Spec.Template})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(append(sameSpecTests(&orig.ObjectMeta), ops...))
}

// sameSpecTests returns the preconditions every conditioned patch starts
// with: the stored object is still the one read (metadata.uid), with the spec
// read (metadata.generation).
func sameSpecTests(read *metav1.ObjectMeta) []jsonPatchOp {
	return []jsonPatchOp{
		testString("/metadata/uid", string(read.UID)),
		testInt("/metadata/generation", read.Generation),
	}
}
