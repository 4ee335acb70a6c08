package rolloutstate

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
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

// BenchmarkTemplatesEqualIgnoringHash compares the copying reference, equality.Semantic.DeepEqual alone and
// TemplatesEqualIgnoringHash on two equal templates (the common case: a Deployment's new ReplicaSet compared every
// sync), of one container ("small") and of richTemplate's two ("rich"), and on two rich ones that differ in an
// env value only (DeepEqual decides them: "rich-env-differs").
func BenchmarkTemplatesEqualIgnoringHash(b *testing.B) {
	small := v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
	small.Labels = map[string]string{"app": "web"}
	envDiffers := richTemplate("nginx:1")
	envDiffers.Spec.Containers[0].Env[0].Value = "staging"
	semantic := func(a, b *v1.PodTemplateSpec) bool {
		a1, b1 := *a, *b
		a1.Labels, b1.Labels = nil, nil
		return labelsEqualIgnoringHash(a.Labels, b.Labels) && equality.Semantic.DeepEqual(&a1, &b1)
	}
	for _, pair := range []struct {
		name string
		tpl  v1.PodTemplateSpec
		want bool
	}{{"small", small, true}, {"rich", richTemplate("nginx:1"), true}, {"rich-env-differs", envDiffers, false}} {
		rs := richTemplate("nginx:1")
		if pair.name == "small" {
			rs = *small.DeepCopy()
		}
		rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
		for _, f := range []struct {
			name string
			eq   func(a, b *v1.PodTemplateSpec) bool
		}{{"deepcopy", deepCopyEqual}, {"semantic", semantic}, {"TemplatesEqualIgnoringHash", TemplatesEqualIgnoringHash}} {
			b.Run(pair.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if f.eq(&rs, &pair.tpl) != pair.want {
						b.Fatalf("not %v", pair.want)
					}
				}
			})
		}
	}
}

// richTemplate is a pod template of the size real Deployments carry: an app container with ports, env,
// resources and probes, and a sidecar with a volume.
func richTemplate(image string) v1.PodTemplateSpec {
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5}
	return v1.PodTemplateSpec{Spec: v1.PodSpec{
		Containers: []v1.Container{{
			Name: "web", Image: image, Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Env: []v1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu"}},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")},
			},
			ReadinessProbe: probe, LivenessProbe: probe,
		}, {
			Name: "proxy", Image: "envoy:1.30", Args: []string{"--config", "/etc/envoy.yaml"},
			VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc"}},
		}},
		Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "envoy"}}}}},
	}, ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}
}

// randomTemplates returns n pod templates filled at random (apimachinery's API fuzzer, as its round-trip tests use
// it), each with a container or two and quantities in their resources, some spelt as the API server would not
// spell them ("1000m").
func randomTemplates(seed int64, n int) []v1.PodTemplateSpec {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), scheme.Codecs).NilChance(0.3).NumElements(1, 2)
	r := rand.New(rand.NewSource(seed))
	cpus := []string{"1", "1000m", "250m", "0.5"}
	out := make([]v1.PodTemplateSpec, n)
	for i := range out {
		f.Fill(&out[i])
		if len(out[i].Spec.Containers) == 0 {
			out[i].Spec.Containers = []v1.Container{{Name: "c", Image: "nginx:1"}}
		}
		for j := range out[i].Spec.Containers {
			out[i].Spec.Containers[j].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpus[r.Intn(len(cpus))])}
		}
	}
	return out
}

// roundTrip returns tpl marshalled to protobuf and decoded again, as a watch delivers it.
func roundTrip(t *testing.T, tpl *v1.PodTemplateSpec) *v1.PodTemplateSpec {
	t.Helper()
	data, err := tpl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &v1.PodTemplateSpec{}
	if err := out.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	return out
}

// mutations change one field of a template below its containers' names and images and say whether the result is
// still semantically equal to the original (only the respelt quantity is).
var mutations = []func(*v1.PodTemplateSpec) bool{
	func(p *v1.PodTemplateSpec) bool {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: "X", Value: "1"})
		return false
	},
	func(p *v1.PodTemplateSpec) bool {
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 7}
		return false
	},
	func(p *v1.PodTemplateSpec) bool {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "extra"})
		return false
	},
	func(p *v1.PodTemplateSpec) bool {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
		return false
	},
	func(p *v1.PodTemplateSpec) bool { // the same value spelt otherwise
		q := p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU]
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)}
		return true
	},
}

// TestTemplatesEqualIgnoringHashAsSemantic (RV-1) checks TemplatesEqualIgnoringHash against deepCopyEqual on
// random templates, each paired with its deep copy, its protobuf round trip, a copy whose first container's
// quantity is spelt otherwise (equal), and copies that differ in one field below the names and images (an env
// value, a probe's period, a volume's name, a quantity's value): the pairs the encoding decides and those it
// leaves to DeepEqual. It also counts the pairs whose encodings agree, so the fast path is exercised.
func TestTemplatesEqualIgnoringHashAsSemantic(t *testing.T) {
	pairs, encoded := 0, 0
	check := func(i int, what string, a, b *v1.PodTemplateSpec, want *bool) {
		pairs++
		ref := deepCopyEqual(a, b)
		if want != nil && ref != *want {
			t.Fatalf("template %d, %s: the reference says %v, the mutation meant %v", i, what, ref, *want)
		}
		if got := TemplatesEqualIgnoringHash(a, b); got != ref {
			t.Fatalf("template %d, %s: %v, want %v\n%#v\n%#v", i, what, got, ref, a, b)
		}
		if got := TemplatesEqualIgnoringHash(b, a); got != ref {
			t.Fatalf("template %d, %s (reversed): %v, want %v", i, what, got, ref)
		}
		if sameEncodingIgnoringLabels(a, b) {
			encoded++
			if !ref {
				t.Fatalf("template %d, %s: same encoding, yet unequal", i, what)
			}
		}
	}
	yes := true
	for i, tpl := range randomTemplates(48, 500) {
		check(i, "deep copy", &tpl, tpl.DeepCopy(), &yes)
		check(i, "protobuf round trip", &tpl, roundTrip(t, &tpl), nil)
		for m, mutate := range mutations {
			c := tpl.DeepCopy()
			want := mutate(c)
			check(i, fmt.Sprintf("mutation %d", m), &tpl, c, &want)
		}
	}
	t.Logf("%d of %d pairs equal by their encoding", encoded, pairs)
	if encoded < pairs/4 {
		t.Fatalf("%d of %d pairs decided by their encoding: the fast path is not exercised", encoded, pairs)
	}
}

// TestQuantitiesOutsideMapsKnowsEveryPath walks PodTemplateSpec's type for every resource.Quantity that is not a
// map value (their marshalling writes their string form into them) and checks quantitiesOutsideMaps knows each:
// the list below must follow the API, and a template with a Quantity set at each path is reported.
func TestQuantitiesOutsideMapsKnowsEveryPath(t *testing.T) {
	quantity := reflect.TypeFor[resource.Quantity]()
	var found []string
	var walk func(tp reflect.Type, path string, open map[reflect.Type]bool)
	walk = func(tp reflect.Type, path string, open map[reflect.Type]bool) {
		switch {
		case tp == quantity:
			found = append(found, path)
		case tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice || tp.Kind() == reflect.Array:
			walk(tp.Elem(), path, open)
		case tp.Kind() == reflect.Struct && !open[tp]:
			open[tp] = true
			for i := range tp.NumField() {
				walk(tp.Field(i).Type, path+"."+tp.Field(i).Name, open)
			}
			delete(open, tp)
		}
	}
	walk(reflect.TypeFor[v1.PodTemplateSpec](), "", map[reflect.Type]bool{})
	want := []string{
		".Spec.Volumes.VolumeSource.EmptyDir.SizeLimit",
		".Spec.Volumes.VolumeSource.DownwardAPI.Items.ResourceFieldRef.Divisor",
		".Spec.Volumes.VolumeSource.Projected.Sources.DownwardAPI.Items.ResourceFieldRef.Divisor",
		".Spec.InitContainers.Env.ValueFrom.ResourceFieldRef.Divisor",
		".Spec.Containers.Env.ValueFrom.ResourceFieldRef.Divisor",
		".Spec.EphemeralContainers.EphemeralContainerCommon.Env.ValueFrom.ResourceFieldRef.Divisor",
	}
	slices.Sort(found)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Fatalf("Quantities outside maps in PodTemplateSpec:\n%q\nquantitiesOutsideMaps knows:\n%q", found, want)
	}
	one := resource.MustParse("1")
	ref := &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: one}
	env := []v1.EnvVar{{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: ref}}}
	files := []v1.DownwardAPIVolumeFile{{Path: "cpu", ResourceFieldRef: ref}}
	for name, spec := range map[string]v1.PodSpec{
		"emptyDir sizeLimit":  {Volumes: []v1.Volume{{VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &one}}}}},
		"downwardAPI volume":  {Volumes: []v1.Volume{{VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: files}}}}},
		"projected volume":    {Volumes: []v1.Volume{{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{Items: files}}}}}}}},
		"init container env":  {InitContainers: []v1.Container{{Env: env}}},
		"container env":       {Containers: []v1.Container{{Env: env}}},
		"ephemeral container": {EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Env: env}}}},
	} {
		if !quantitiesOutsideMaps(&v1.PodTemplateSpec{Spec: spec}) {
			t.Errorf("%s: not reported", name)
		}
	}
	if tpl := richTemplate("nginx:1"); quantitiesOutsideMaps(&tpl) {
		t.Errorf("richTemplate (quantities in maps only) reported")
	}
}

// TestTemplatesEqualIgnoringHashConcurrent compares the same decoded templates (as an informer's, shared by every
// reader) from several goroutines at once, with quantities outside maps and in them, spelt so that decoding does
// not keep their string form ("16Mi", "128Mi": ParseQuantity keeps it only for some canonical forms); under -race
// (CI runs this package with it) a write into them, such as Quantity.String caching its form, fails it.
func TestTemplatesEqualIgnoringHashConcurrent(t *testing.T) {
	plain := richTemplate("nginx:1")
	withRef := richTemplate("nginx:1")
	withRef.Spec.Containers[0].Env = append(withRef.Spec.Containers[0].Env, v1.EnvVar{Name: "CPU",
		ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("16Mi")}}})
	sizeLimit := resource.MustParse("128Mi")
	withRef.Spec.Volumes = append(withRef.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &sizeLimit}}})
	pairs := [][2]*v1.PodTemplateSpec{{roundTrip(t, &plain), roundTrip(t, &plain)}, {roundTrip(t, &withRef), roundTrip(t, &withRef)}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for _, p := range pairs {
					if !TemplatesEqualIgnoringHash(p[0], p[1]) {
						t.Error("equal templates compared unequal")
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
