package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// NewDeployment returns a RollingUpdate Deployment ns/name of replicas pods
// running image, selected by label app=name, with maxSurge/maxUnavailable 25%.
func NewDeployment(ns, name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail},
			},
			Template: podTemplate(labels, name, image),
		},
	}
}

// podTemplate returns a pod template with labels and one container named
// container running image.
func podTemplate(labels map[string]string, container, image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: container, Image: image}}},
	}
}

// NewReplicaSet returns a bare ReplicaSet ns/name of replicas pods (no
// owner), selected by label app=name, with one container named name running
// nginx:1.9.
func NewReplicaSet(ns, name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, name, "nginx:1.9"),
		},
	}
}

// DeploymentComplete reports whether d's status shows a finished rollout of
// its current generation: every replica updated and available, and no extra
// pods (ST-9).
func DeploymentComplete(d *appsv1.Deployment) bool { return rolloutstate.Complete(d, &d.Status) }

// WaitComplete waits up to timeout for Deployment ns/name to be complete and returns it.
func WaitComplete(t *testing.T, client kubernetes.Interface, ns, name string, timeout time.Duration) *appsv1.Deployment {
	t.Helper()
	var last *appsv1.Deployment
	Eventually(t, timeout, fmt.Sprintf("deployment %s/%s to complete", ns, name), func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d
		return DeploymentComplete(d), nil
	})
	return last
}

// OwnedReplicaSets lists the ReplicaSets in ns whose ControllerRef is Deployment d.
func OwnedReplicaSets(ctx context.Context, t *testing.T, client kubernetes.Interface, d *appsv1.Deployment) []appsv1.ReplicaSet {
	t.Helper()
	list, err := client.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ReplicaSets: %v", err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range rolloutstate.ControlledReplicaSets(list, d.UID) {
		out = append(out, *rs)
	}
	return out
}

// SetImage changes container's image in Deployment ns/name as `kubectl set
// image` does (a strategic-merge patch of the template), failing t on error.
func SetImage(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name, container, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, container, image)
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting the image of %s/%s: %v", ns, name, err)
	}
}

// ScaleDeployment sets Deployment ns/name's spec.replicas as `kubectl scale`
// does (a merge patch), failing t on error.
func ScaleDeployment(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// ScaleReplicaSet sets ReplicaSet ns/name's spec.replicas as `kubectl scale
// rs` does (a merge patch), failing t on error.
func ScaleReplicaSet(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := client.AppsV1().ReplicaSets(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling ReplicaSet %s/%s to %d: %v", ns, name, replicas, err)
	}
}
