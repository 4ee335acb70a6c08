package deployment

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// baseTime is the fixed creation time objects in tests start from.
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newDeployment returns a defaulted RollingUpdate Deployment "nginx" in
// namespace "ns" with surge/unavailable as given.
func newDeployment(replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nginx", Namespace: "ns", UID: "d-uid", Generation: 1, ResourceVersion: "100",
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: podTemplate("nginx:1.14.2"),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func podTemplate(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: image}}},
	}
}

// newRS returns a ReplicaSet owned by d with the given template image, size,
// age (minutes after baseTime) and annotations.
func newRS(d *appsv1.Deployment, name, image string, size int32, minute int, annotations map[string]string) *appsv1.ReplicaSet {
	tmpl := podTemplate(image)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.Namespace, UID: types.UID(name + "-uid"), ResourceVersion: "10",
			Labels:            map[string]string{"app": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: name},
			Annotations:       annotations,
			CreationTimestamp: metav1.NewTime(baseTime.Add(time.Duration(minute) * time.Minute)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(size),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: name}},
			Template: tmpl,
		},
	}
}

// withStatus sets the ReplicaSet's status counts (replicas = ready = available unless given).
func withStatus(rs *appsv1.ReplicaSet, replicas, available int32) *appsv1.ReplicaSet {
	rs.Status.Replicas = replicas
	rs.Status.ReadyReplicas = available
	rs.Status.AvailableReplicas = available
	rs.Status.ObservedGeneration = 1
	rs.Status.TerminatingReplicas = ptr.To[int32](0)
	return rs
}

// sizeAnnotations returns desired/max (and optionally revision) annotations.
func sizeAnnotations(desired, maxReplicas int32, rev int) map[string]string {
	m := map[string]string{
		DesiredReplicasAnnotation: strconv.Itoa(int(desired)),
		MaxReplicasAnnotation:     strconv.Itoa(int(maxReplicas)),
	}
	if rev > 0 {
		m[RevisionAnnotation] = strconv.Itoa(rev)
	}
	return m
}
