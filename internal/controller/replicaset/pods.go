package replicaset

import (
	"errors"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
)

// controllerKind is the GroupVersionKind written in the ControllerRef of the
// pods a ReplicaSet owns (OM-24).
var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// errNoLabels is returned for a template without labels (RS-13): such pods
// could never be matched back to their ReplicaSet.
var errNoLabels = errors.New("unable to create pods, no labels")

// podFromTemplate builds the pod rs creates (RS-13, OM-23, OM-24): the
// template's labels, annotations, finalizers and spec are copied, the
// ControllerRef points at rs and the name is generated from
// "<rsName>-". It returns errNoLabels for a template without labels.
func podFromTemplate(rs *appsv1.ReplicaSet) (*v1.Pod, error) {
	tmpl := &rs.Spec.Template
	if len(tmpl.Labels) == 0 {
		return nil, errNoLabels
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       rs.Namespace,
			GenerateName:    podNamePrefix(rs.Name),
			Labels:          maps.Clone(tmpl.Labels),
			Annotations:     maps.Clone(tmpl.Annotations),
			Finalizers:      slices.Clone(tmpl.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*ownership.NewControllerRef(rs, controllerKind)},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	return pod, nil
}

// podNamePrefix is "<rsName>-", or rsName when that is not a valid pod name
// prefix (OM-23).
func podNamePrefix(rsName string) string {
	prefix := rsName + "-"
	if len(validation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return rsName
	}
	return prefix
}
