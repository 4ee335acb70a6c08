package rawtemplate

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
)

// The cost of one ReplicaSet watch event by decode path, to weigh where IM-8's JSON informers spend CPU
// (`go test -run xxx -bench Decode ./internal/controller/rawtemplate/`). On the project's 2-core machine,
// 2026-11-25: protobuf (the typed informers before IM-8) 8 µs and 45 allocations; JSON to a map, then the
// validating conversion (today's path) 83 µs and 361 allocations; the same without validation 69 µs; strict JSON
// straight into the typed struct (sigs.k8s.io/json, what a custom decoder could do) 43 µs and 107 allocations.

func sampleReplicaSet() *appsv1.ReplicaSet {
	replicas := int32(5)
	labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "abc"}
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "u", Generation: 3, ResourceVersion: "12345", Labels: labels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "2", "deployment.kubernetes.io/desired-replicas": "5",
				"deployment.kubernetes.io/max-replicas": "7"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d"}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx:1",
					Resources:              v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent"}},
					RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler", SecurityContext: &v1.PodSecurityContext{}}}},
		Status: appsv1.ReplicaSetStatus{Replicas: 5, ReadyReplicas: 5, AvailableReplicas: 5, ObservedGeneration: 3},
	}
}

func BenchmarkDecodeJSONThroughNote(b *testing.B) {
	data, _ := json.Marshal(sampleReplicaSet())
	s := NewStore(klog.Background(), nil)
	b.ReportAllocs()
	for b.Loop() {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Note(u); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSONUnvalidated(b *testing.B) {
	data, _ := json.Marshal(sampleReplicaSet())
	b.ReportAllocs()
	for b.Loop() {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &appsv1.ReplicaSet{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSONStrictTyped(b *testing.B) {
	data, _ := json.Marshal(sampleReplicaSet())
	b.ReportAllocs()
	for b.Loop() {
		if strict, err := kjson.UnmarshalStrict(data, &appsv1.ReplicaSet{}); err != nil || len(strict) > 0 {
			b.Fatal(err, strict)
		}
	}
}

func BenchmarkDecodeProtobuf(b *testing.B) {
	data, _ := sampleReplicaSet().Marshal()
	b.ReportAllocs()
	for b.Loop() {
		if err := (&appsv1.ReplicaSet{}).Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProtobufChecked is what the informers do since IM-8 became protobuf-first: protobuf, then the
// length check against the typed object's Size and the Store's entry.
func BenchmarkDecodeProtobufChecked(b *testing.B) {
	s := NewStore(klog.Background(), nil)
	dec := checkingBenchDecoder(b, s)
	data := protobufBench(b, sampleReplicaSet())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := dec.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProtobufEnvelope is the same protobuf decode through client-go's decoder without the check, to
// weigh the check alone.
func BenchmarkDecodeProtobufEnvelope(b *testing.B) {
	codecs := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	dec := codecs.DecoderToVersion(info.Serializer, appsv1.SchemeGroupVersion)
	data := protobufBench(b, sampleReplicaSet())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := dec.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func checkingBenchDecoder(b *testing.B, s *Store) runtime.Decoder {
	codecs := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		b.Fatal("no protobuf serializer")
	}
	return checkingSerializer{NegotiatedSerializer: codecs, store: s}.DecoderToVersion(info.Serializer, appsv1.SchemeGroupVersion)
}

func protobufBench(b *testing.B, obj runtime.Object) []byte {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, appsv1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
