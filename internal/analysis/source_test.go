package analysis

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// EX-6: Source reads the named templates from the Deployment's namespace only, and names a missing one.
func TestSourceTemplates(t *testing.T) {
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods-ready", Labels: map[string]string{TemplateLabel: "true"}},
			Data: map[string]string{MetricsKey: "- name: ready\n  successCondition: result.notReady == 0\n  provider: {pods: {}}\n"}}
	}
	s := NewSource(fake.NewClientset(cm("web")), Prometheus{})
	metrics, err := s.Templates(context.Background(), "web", []string{"pods-ready"}, nil)
	if err != nil || len(metrics) != 1 || metrics[0].Name != "ready" {
		t.Fatalf("Templates = %+v, %v", metrics, err)
	}
	_, err = s.Templates(context.Background(), "other", []string{"pods-ready"}, nil)
	if err == nil || !strings.Contains(err.Error(), `analysis template "pods-ready": no such ConfigMap in namespace other`) {
		t.Errorf("another namespace: %v", err)
	}
}
