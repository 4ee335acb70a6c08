package apidefaults

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// VA-1: a bare Deployment gets the apps/v1 defaults and its pod template
// the core/v1 ones; a field the manifest sets is kept.
func TestDeployment(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		RevisionHistoryLimit: ptr.To[int32](3),
		Template:             v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx"}}}},
	}}
	Deployment(d)
	s := d.Spec
	if *s.Replicas != 1 || s.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		*s.Strategy.RollingUpdate.MaxSurge != intstr.FromString("25%") || *s.Strategy.RollingUpdate.MaxUnavailable != intstr.FromString("25%") ||
		*s.RevisionHistoryLimit != 3 || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("spec defaults %+v", s)
	}
	pod, c := s.Template.Spec, s.Template.Spec.Containers[0]
	if pod.RestartPolicy != v1.RestartPolicyAlways || pod.DNSPolicy != v1.DNSClusterFirst || c.TerminationMessagePath != v1.TerminationMessagePathDefault || c.ImagePullPolicy != v1.PullAlways {
		t.Errorf("pod template defaults: restartPolicy %q, dnsPolicy %q, terminationMessagePath %q, imagePullPolicy %q",
			pod.RestartPolicy, pod.DNSPolicy, c.TerminationMessagePath, c.ImagePullPolicy)
	}

	rs := &appsv1.ReplicaSet{}
	ReplicaSet(rs)
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 1 {
		t.Errorf("ReplicaSet replicas %v, want 1", rs.Spec.Replicas)
	}
}
