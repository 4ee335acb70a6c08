package rolloutstate

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// deepCopyEqual is TemplatesEqualIgnoringHash as it was before it stopped copying (RV-1's reference): both
// templates deep-copied, the hash label deleted, then compared semantically.
func deepCopyEqual(a, b *v1.PodTemplateSpec) bool {
	a1, b1 := a.DeepCopy(), b.DeepCopy()
	delete(a1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a1, b1)
}

// TestTemplatesEqualIgnoringHashAsDeepCopy (RV-1) checks TemplatesEqualIgnoringHash against deepCopyEqual for
// every pair of a set of templates that differ in labels (nil, empty, hash only, one more, another value),
// annotations (nil against empty), the image and a quantity's spelling, both ways round, and that neither input
// is changed.
func TestTemplatesEqualIgnoringHashAsDeepCopy(t *testing.T) {
	const hash = appsv1.DefaultDeploymentUniqueLabelKey
	labels := []map[string]string{nil, {}, {hash: "a"}, {hash: "b"}, {"app": "web"}, {"app": "web", hash: "a"},
		{"app": "api", hash: "a"}, {"app": "web", "tier": "x"}, {"tier": "x", hash: "a"}}
	var templates []v1.PodTemplateSpec
	for _, l := range labels {
		for _, image := range []string{"nginx:1", "nginx:2"} {
			for _, cpu := range []string{"1", "1000m", "2"} {
				for _, annotations := range []map[string]string{nil, {}} {
					tpl := v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image,
						Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
					tpl.Labels, tpl.Annotations = l, annotations
					templates = append(templates, tpl)
				}
			}
		}
	}
	equal := 0
	for i := range templates {
		for j := range templates {
			a, b := &templates[i], &templates[j]
			before := fmt.Sprint(a.Labels, b.Labels)
			want := deepCopyEqual(a, b)
			if got := TemplatesEqualIgnoringHash(a, b); got != want {
				t.Errorf("labels %v / %v, image %s / %s, cpu %v / %v: %v, want %v", a.Labels, b.Labels,
					a.Spec.Containers[0].Image, b.Spec.Containers[0].Image, a.Spec.Containers[0].Resources.Limits.Cpu(),
					b.Spec.Containers[0].Resources.Limits.Cpu(), got, want)
			}
			if after := fmt.Sprint(a.Labels, b.Labels); after != before {
				t.Fatalf("inputs changed: %s, then %s", before, after)
			}
			if want {
				equal++
			}
		}
	}
	if equal == 0 || equal == len(templates)*len(templates) {
		t.Fatalf("%d equal pairs of %d: the set does not exercise both answers", equal, len(templates)*len(templates))
	}
}

// BenchmarkTemplatesEqualIgnoringHash compares the copying reference with TemplatesEqualIgnoringHash on two
// equal templates of one container (the common case: a Deployment's ReplicaSets compared every sync).
func BenchmarkTemplatesEqualIgnoringHash(b *testing.B) {
	tpl := v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
	tpl.Labels = map[string]string{"app": "web"}
	rs := *tpl.DeepCopy()
	rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	for name, f := range map[string]func(a, b *v1.PodTemplateSpec) bool{"deepcopy": deepCopyEqual, "shallow": TemplatesEqualIgnoringHash} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !f(&rs, &tpl) {
					b.Fatal("not equal")
				}
			}
		})
	}
}
