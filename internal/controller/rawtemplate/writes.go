package rawtemplate

import (
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// The creates that carry a stored template (IM-8) are built here and sent by the controllers' Client
// (deployment.Client.CreateReplicaSetUnstructured, replicaset.Client.CreatePodUnstructured): the live adapter
// sends them through the dynamic client, the recording one (dryrun) records and answers them. This file builds the
// objects and reads the answers; it sends nothing.

// ReplicaSetWithTemplate returns rs as JSON (apiVersion and kind set) with its pod template replaced by template, a
// Deployment's template as stored (Template), with rs's template labels (the Deployment's plus pod-template-hash)
// set on it: every field of the Deployment's template reaches the ReplicaSet, known or not (IM-8). template is
// changed. The error says rs or template does not convert.
func ReplicaSetWithTemplate(rs *appsv1.ReplicaSet, template map[string]any) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(rs, replicaSetKind)
	if err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedStringMap(template, rs.Spec.Template.Labels, "metadata", "labels"); err != nil {
		return nil, fmt.Errorf("labelling the pod template of replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	if err := unstructured.SetNestedField(u.Object, template, "spec", "template"); err != nil {
		return nil, fmt.Errorf("building replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return u, nil
}

// PodWithTemplateSpec returns pod as JSON (apiVersion and kind set) with its spec replaced by the spec of template,
// a ReplicaSet's pod template as stored (Template): every field of it reaches the pod, known or not (IM-8). pod's
// metadata (labels, annotations, finalizers, owner) is kept as built. The error says pod or template does not
// convert.
func PodWithTemplateSpec(pod *v1.Pod, template map[string]any) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(pod, v1.SchemeGroupVersion.WithKind("Pod"))
	if err != nil {
		return nil, err
	}
	spec, _, err := unstructured.NestedFieldCopy(template, "spec")
	if err != nil {
		return nil, fmt.Errorf("reading the pod template's spec: %w", err)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u, nil
}

// NoteReplicaSet is Note for a ReplicaSet the API server returned from a create of ReplicaSetWithTemplate's object:
// it notes what the ReplicaSet holds beyond the typed object (its stored template, its fingerprint) and returns the
// typed ReplicaSet. The error says u is not a ReplicaSet or does not convert.
func (s *Store) NoteReplicaSet(u *unstructured.Unstructured) (*appsv1.ReplicaSet, error) {
	obj, err := s.Note(u)
	if err != nil {
		return nil, err
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return nil, fmt.Errorf("rawtemplate: the create of a replica set returned a %T", obj)
	}
	return rs, nil
}

// PodFrom returns u, a pod as the API server returned it, typed: fields unknown to kubedeploy are dropped. The error
// says u does not convert.
func PodFrom(u *unstructured.Unstructured) (*v1.Pod, error) {
	out := &v1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding created pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// WithoutLabel returns template (changed in place) without the label key: a ReplicaSet's stored template as the
// Deployment had it, for a rollback (RB-5).
func WithoutLabel(template map[string]any, key string) map[string]any {
	if labels, ok, _ := unstructured.NestedStringMap(template, "metadata", "labels"); ok {
		delete(labels, key)
		if len(labels) == 0 {
			unstructured.RemoveNestedField(template, "metadata", "labels")
		} else {
			_ = unstructured.SetNestedStringMap(template, labels, "metadata", "labels")
		}
	}
	return template
}

// Carry returns typed (a Deployment, ReplicaSet or pod of client-go's scheme) as JSON, apiVersion and kind set,
// with every field of stored (the same kind's JSON, as the API server stores it) that typed's Go type does not
// know, set at its path where typed's JSON has the field's parent (a field of a container typed no longer has is
// dropped). It is how an object that went through a typed path (a patch applied to typed JSON, a simulated
// API server's store) is answered as a server that keeps unknown fields would answer it, and how a typed object
// changed in memory (`rollout plan --image`) keeps the stored fields the change did not touch. A nil stored
// carries nothing. The error says typed's kind is unknown or an object does not convert.
func Carry(typed runtime.Object, stored map[string]any) (*unstructured.Unstructured, error) {
	gvks, _, err := scheme.Scheme.ObjectKinds(typed)
	if err != nil {
		return nil, fmt.Errorf("rawtemplate: %w", err)
	}
	u, err := toUnstructured(typed, gvks[0])
	if err != nil || stored == nil {
		return u, err
	}
	paths, err := UnknownFields(runtime.DeepCopyJSON(stored), reflect.New(reflect.TypeOf(typed).Elem()).Interface())
	if err != nil {
		return nil, fmt.Errorf("reading the fields of %s %s/%s as stored: %w", gvks[0].Kind, u.GetNamespace(), u.GetName(), err)
	}
	for _, p := range paths {
		if v, ok := Field(stored, p); ok {
			setField(u.Object, p, runtime.DeepCopyJSONValue(v))
		}
	}
	return u, nil
}

// setField sets path ("a.b[2].c", as UnknownFields gives it) in obj to v when the path's parent leads to a map;
// otherwise it does nothing.
func setField(obj map[string]any, path string, v any) {
	parent, key := obj, path
	if i := strings.LastIndex(path, "."); i >= 0 {
		p, ok := Field(obj, path[:i])
		if parent, ok = p.(map[string]any); !ok {
			return
		}
		key = path[i+1:]
	}
	parent[key] = v
}

func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
