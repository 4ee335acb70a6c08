package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selector returns an owner's label selector (a Deployment's or a
// ReplicaSet's spec.selector) parsed, or false when it is missing, empty or
// invalid: an empty selector would select every object in the namespace, and
// the API server never accepts one for apps/v1, so controllers treat such an
// owner as selecting nothing (RS-3; the Deployment sync reports it, SD-2).
func Selector(sel *metav1.LabelSelector) (labels.Selector, bool) {
	if sel == nil {
		return nil, false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil, false
	}
	return s, true
}

// Selecting returns, in order, the owners among owners whose selector
// (selectorOf(owner), see Selector) matches objLabels: the candidates to
// adopt an orphan (EH-2, EH-3, EH-10, EH-11). An object without labels has
// none, as upstream's controllers decide.
func Selecting[T any](owners []T, selectorOf func(T) *metav1.LabelSelector, objLabels map[string]string) []T {
	if len(objLabels) == 0 {
		return nil
	}
	var out []T
	for _, o := range owners {
		if sel, ok := Selector(selectorOf(o)); ok && sel.Matches(labels.Set(objLabels)) {
			out = append(out, o)
		}
	}
	return out
}
