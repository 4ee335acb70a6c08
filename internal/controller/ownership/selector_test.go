package ownership

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSelector: a missing, empty or invalid owner selector selects nothing
// (RS-3); a valid one is parsed.
func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		ok   bool
	}{
		{"missing", nil, false},
		{"empty", &metav1.LabelSelector{}, false},
		{"empty maps", &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}, false},
		{"invalid operator", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}, false},
		{"labels", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := Selector(tc.sel); ok != tc.ok {
				t.Errorf("Selector(%v) ok = %v, want %v", tc.sel, ok, tc.ok)
			}
		})
	}
}

// TestSelecting: the owners whose valid selector matches the labels, in
// order; none for an object without labels, even for a selector that only
// excludes (EH-2, EH-10).
func TestSelecting(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	notDB := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}}
	owners := []*metav1.LabelSelector{web, nil, notDB, {}}
	self := func(s *metav1.LabelSelector) *metav1.LabelSelector { return s }
	if got := Selecting(owners, self, map[string]string{"app": "web"}); len(got) != 2 || got[0] != web || got[1] != notDB {
		t.Errorf("app=web: got %v, want [web, notDB]", got)
	}
	if got := Selecting(owners, self, map[string]string{"app": "db"}); len(got) != 0 {
		t.Errorf("app=db: got %v, want none", got)
	}
	if got := Selecting(owners, self, nil); len(got) != 0 {
		t.Errorf("no labels: got %v, want none", got)
	}
}
