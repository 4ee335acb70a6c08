package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
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
	if !rolloutstate.TemplatesEqualIgnoringHash(&a, &b) {
		t.Error("hash label must be ignored")
	}
	b.Annotations = map[string]string{}
	if !rolloutstate.TemplatesEqualIgnoringHash(&a, &b) {
		t.Error("nil and empty maps must be equal")
	}
	a.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1")}
	b.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1000m")}
	if !rolloutstate.TemplatesEqualIgnoringHash(&a, &b) {
		t.Error("quantities must compare numerically")
	}
	c := podTemplate("nginx:2")
	if rolloutstate.TemplatesEqualIgnoringHash(&a, &c) {
		t.Error("different images must differ")
	}
	if _, ok := a.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("inputs must not be modified")
	}
	if b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Error("inputs must not be modified")
	}
}

// fromJSON notes the JSON of an apps/v1 object in templates, as Resolve does once it has read an object the
// informer could not fully decode, and returns the typed object.
func fromJSON[T any](t *testing.T, templates *rawtemplate.Store, raw string) T {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	out, err := templates.Note(u)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

// templateJSON is an apps/v1 kind's JSON with uid, pod template labels app=web plus extraLabels and, when future is
// not "", the pod-level field someFutureField that kubedeploy's API does not know.
func templateJSON(kind, uid, future, extraLabels string) string {
	field := ""
	if future != "" {
		field = `"someFutureField": "` + future + `",`
	}
	return `{"apiVersion": "apps/v1", "kind": "` + kind + `", "metadata": {"name": "` + uid + `", "namespace": "ns", "uid": "` + uid + `", "generation": 1},
	  "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"` + extraLabels + `}},
	    "spec": {` + field + `"containers": [{"name": "web", "image": "nginx:1"}]}}}}`
}

// TestUnknownTemplateFieldsCount (IM-8, RV-1, OM-14): a ReplicaSet is a Deployment's new one only when the values of
// their unknown template fields are equal too, and those values change the pod-template-hash; without unknown
// fields the hash is upstream's (computeHash).
func TestUnknownTemplateFieldsCount(t *testing.T) {
	templates := rawtemplate.NewStore(klog.Background(), nil)
	hashLabel := `, "` + appsv1.DefaultDeploymentUniqueLabelKey + `": "x"`
	d := fromJSON[*appsv1.Deployment](t, templates, templateJSON("Deployment", "d", "Strict", ""))
	same := fromJSON[*appsv1.ReplicaSet](t, templates, templateJSON("ReplicaSet", "same", "Strict", hashLabel))
	other := fromJSON[*appsv1.ReplicaSet](t, templates, templateJSON("ReplicaSet", "other", "Loose", hashLabel))
	none := fromJSON[*appsv1.ReplicaSet](t, templates, templateJSON("ReplicaSet", "none", "", hashLabel))
	for _, rs := range []*appsv1.ReplicaSet{same, other, none} {
		if !rolloutstate.TemplatesEqualIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			t.Fatalf("%s: typed templates differ; the test needs them equal", rs.Name)
		}
	}
	if !sameTemplate(templates, same, d) || sameTemplate(templates, other, d) || sameTemplate(templates, none, d) {
		t.Errorf("sameTemplate: same %v, other value %v, no unknown field %v; want true, false, false",
			sameTemplate(templates, same, d), sameTemplate(templates, other, d), sameTemplate(templates, none, d))
	}
	if got := findNewReplicaSet(templates, d, []*appsv1.ReplicaSet{none, other, same}); got != same {
		t.Errorf("findNewReplicaSet = %v, want %s", got, same.Name)
	}
	if got := findNewReplicaSet(nil, d, []*appsv1.ReplicaSet{none, other, same}); got == nil {
		t.Error("findNewReplicaSet without a store (typed equality only) found nothing")
	}
	plain := hashTemplate(&d.Spec.Template, "", nil)
	if plain != computeHash(&d.Spec.Template, nil) {
		t.Errorf("hashTemplate without unknown fields = %s, computeHash = %s", plain, computeHash(&d.Spec.Template, nil))
	}
	strict, loose := hashTemplate(&d.Spec.Template, templates.Fingerprint(d), nil), hashTemplate(&other.Spec.Template, templates.Fingerprint(other), nil)
	if strict == plain || loose == plain || strict == loose {
		t.Errorf("hashes: none %s, Strict %s, Loose %s; want three different", plain, strict, loose)
	}
}
