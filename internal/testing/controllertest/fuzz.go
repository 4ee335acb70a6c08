package controllertest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzSelector decodes a fuzzed selector mode (taken mod 6) for a workload
// whose selector and template labels are app=<inValues[0]>: 0 matching
// (returned as given), 1 nil, 2 empty, 3 app=other (not matching the
// template), 4 an invalid operator, 5 matchExpressions "app In inValues".
func FuzzSelector(mode uint8, matching *metav1.LabelSelector, inValues ...string) *metav1.LabelSelector {
	switch mode % 6 {
	case 1:
		return nil
	case 2:
		return &metav1.LabelSelector{}
	case 3:
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	case 4:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	case 5:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: inValues}}}
	}
	return matching
}

// SelectorMatchesTemplate reports whether selector would pass API
// validation for a Deployment or ReplicaSet with these template labels:
// present, parsable and not empty (VA-4), and matching them (VA-5, VA-13).
func SelectorMatchesTemplate(selector *metav1.LabelSelector, templateLabels map[string]string) bool {
	if selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(templateLabels))
}

// SpecValid reports whether a Deployment's or ReplicaSet's replicas,
// selector and template labels would pass API validation: replicas set and
// ≥ 0 (VA-3, VA-13) and SelectorMatchesTemplate.
func SpecValid(replicas *int32, selector *metav1.LabelSelector, templateLabels map[string]string) bool {
	return replicas != nil && *replicas >= 0 && SelectorMatchesTemplate(selector, templateLabels)
}
