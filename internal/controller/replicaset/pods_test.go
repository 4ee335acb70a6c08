package replicaset

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodFromTemplate covers RS-13, OM-23 and OM-24.
func TestPodFromTemplate(t *testing.T) {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}, Finalizers: []string{"f"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
		}},
	}
	pod, err := podFromTemplate(rs)
	if err != nil {
		t.Fatal(err)
	}
	if pod.GenerateName != "web-abc-" || pod.Namespace != "ns" || pod.Labels["app"] != "web" || pod.Annotations["a"] != "b" ||
		len(pod.Finalizers) != 1 || pod.Spec.Containers[0].Image != "nginx" {
		t.Errorf("pod not built from the template: %+v", pod)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "ReplicaSet" || ref.Name != "web-abc" || ref.UID != "rs-uid" || !*ref.BlockOwnerDeletion {
		t.Errorf("OM-24 ControllerRef = %+v", ref)
	}
	pod.Labels["app"] = "changed"
	if rs.Spec.Template.Labels["app"] != "web" {
		t.Error("the template must be copied, not shared")
	}

	rs.Spec.Template.Labels = nil
	if _, err := podFromTemplate(rs); !errors.Is(err, errNoLabels) || err.Error() != "unable to create pods, no labels" {
		t.Errorf("template without labels: err = %v", err)
	}
}

func TestPodNamePrefix(t *testing.T) {
	if got := podNamePrefix("web"); got != "web-" {
		t.Errorf("podNamePrefix(web) = %q", got)
	}
	long := strings.Repeat("a", 254)
	if got := podNamePrefix(long); got != long {
		t.Errorf("an invalid prefix must fall back to the name (OM-23), got %d chars", len(got))
	}
}
