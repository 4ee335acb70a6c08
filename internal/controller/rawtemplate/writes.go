package rawtemplate

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var pods = v1.SchemeGroupVersion.WithResource("pods")

// CreateReplicaSet creates rs through client with its pod template replaced by template, a Deployment's template
// as stored (Template), with rs's template labels (the Deployment's plus pod-template-hash) set on it: every field
// of the Deployment's template reaches the ReplicaSet, known or not (IM-8). It returns the created ReplicaSet,
// typed, and notes what it holds; errors are the API server's, as the typed client returns them.
func (s *Store) CreateReplicaSet(ctx context.Context, client dynamic.Interface, rs *appsv1.ReplicaSet, template map[string]any) (*appsv1.ReplicaSet, error) {
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
	created, err := client.Resource(ReplicaSets).Namespace(rs.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	out, err := s.Note(created)
	if err != nil {
		return nil, err
	}
	return out.(*appsv1.ReplicaSet), nil
}

// CreatePod creates pod through client with its spec replaced by the spec of template, a ReplicaSet's pod template
// as stored (Template): every field of it reaches the pod, known or not (IM-8). pod's metadata (labels,
// annotations, finalizers, owner) is sent as built. It returns the created pod, typed (fields unknown to
// kubedeploy dropped); errors are the API server's.
func CreatePod(ctx context.Context, client dynamic.Interface, pod *v1.Pod, template map[string]any) (*v1.Pod, error) {
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
	created, err := client.Resource(pods).Namespace(pod.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	out := &v1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, out); err != nil {
		return nil, fmt.Errorf("decoding created pod %s/%s: %w", created.GetNamespace(), created.GetName(), err)
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

func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
