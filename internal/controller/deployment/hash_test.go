package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// TestComputeHashOM19 checks the OM-19 vectors (and OM-17: nil ≠ 0).
func TestComputeHashOM19(t *testing.T) {
	tmpl := podTemplate("nginx:1.14.2")
	for _, tc := range []struct {
		name  string
		count *int32
		want  string
	}{
		{"OM-19 collisionCount nil", nil, "5d76467944"},
		{"OM-19 collisionCount 0", ptr.To[int32](0), "6784bcb86d"},
		{"OM-19 collisionCount 1", ptr.To[int32](1), "7f4c77ddb5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := computeHash(&tmpl, tc.count); got != tc.want {
				t.Errorf("computeHash = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRenderHashOM18 checks the digit map of OM-18.
func TestRenderHashOM18(t *testing.T) {
	for _, tc := range []struct {
		name string
		sum  uint32
		want string
	}{
		{"OM-18 example", 1832023500, "5d76467944"},
		{"OM-19 count 0", 2340676428, "6784bcb86d"},
		{"OM-19 count 1", 3907338861, "7f4c77ddb5"},
		{"all digits", 1234567890, "56789bcdf4"},
		{"zero", 0, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderHash(tc.sum); got != tc.want {
				t.Errorf("renderHash(%d) = %q, want %q", tc.sum, got, tc.want)
			}
		})
	}
}

func TestReplicaSetNameOM21(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name, d, hash, want string
	}{
		{"short kept", "nginx", "5d76467944", "nginx-5d76467944"},
		{"242 kept", strings.Repeat("b", 242), "5d76467944", strings.Repeat("b", 242) + "-5d76467944"},
		{"longer cut to 242", long, "5d76467944", long[:242] + "-5d76467944"},
		{"no trim of trailing dash", strings.Repeat("c", 241) + "-x", "5d76467944", strings.Repeat("c", 241) + "--5d76467944"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replicaSetName(tc.d, tc.hash)
			if got != tc.want {
				t.Errorf("replicaSetName = %q, want %q", got, tc.want)
			}
			if len(got) > 253 {
				t.Errorf("name has %d chars", len(got))
			}
		})
	}
}

func TestTemplatesEqualIgnoringHashRV1(t *testing.T) {
	a := podTemplate("nginx:1")
	b := podTemplate("nginx:1")
	b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("hash label must be ignored")
	}
	b.Annotations = map[string]string{}
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("nil and empty maps must be equal")
	}
	a.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1")}
	b.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1000m")}
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("quantities must compare numerically")
	}
	c := podTemplate("nginx:2")
	if templatesEqualIgnoringHash(&a, &c) {
		t.Error("different images must differ")
	}
	if _, ok := a.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("inputs must not be modified")
	}
	if b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Error("inputs must not be modified")
	}
}
