package controllertest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestFuzzSelector: each mode's selector, checked against a template
// labelled app=web.
func TestFuzzSelector(t *testing.T) {
	matching := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	template := map[string]string{"app": "web"}
	for mode, want := range []bool{true, false, false, false, false, true, true} { // 6 is 0 again
		sel := FuzzSelector(uint8(mode), matching, "web", "db")
		if got := SelectorMatchesTemplate(sel, template); got != want {
			t.Errorf("mode %d: selector %+v matches = %v, want %v", mode, sel, got, want)
		}
	}
	if sel := FuzzSelector(0, matching); sel != matching {
		t.Errorf("mode 0 = %+v, want the matching selector itself", sel)
	}
	if sel := FuzzSelector(1, matching); sel != nil {
		t.Errorf("mode 1 = %+v, want nil", sel)
	}
}

// TestSpecValid covers VA-3, VA-4, VA-5 and VA-13 as SpecValid applies them.
func TestSpecValid(t *testing.T) {
	web := map[string]string{"app": "web"}
	sel := &metav1.LabelSelector{MatchLabels: web}
	for _, tc := range []struct {
		name     string
		replicas *int32
		selector *metav1.LabelSelector
		labels   map[string]string
		want     bool
	}{
		{"valid", ptr.To[int32](3), sel, web, true},
		{"zero replicas", ptr.To[int32](0), sel, web, true},
		{"nil replicas", nil, sel, web, false},
		{"negative replicas", ptr.To[int32](-1), sel, web, false},
		{"nil selector", ptr.To[int32](1), nil, web, false},
		{"empty selector", ptr.To[int32](1), &metav1.LabelSelector{}, web, false},
		{"invalid operator", ptr.To[int32](1), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}, web, false},
		{"not matching the template", ptr.To[int32](1), sel, map[string]string{"app": "db"}, false},
		{"template without labels", ptr.To[int32](1), sel, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SpecValid(tc.replicas, tc.selector, tc.labels); got != tc.want {
				t.Errorf("SpecValid = %v, want %v", got, tc.want)
			}
		})
	}
}
