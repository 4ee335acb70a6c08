package podcache

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// codecs returns the protobuf encoder the API server's wire format comes from, the client's full decoder and the
// partial one NewClient installs.
func codecs(t testing.TB) (enc runtime.Encoder, full, partial runtime.Decoder) {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	ns := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	return scheme.Codecs.EncoderForVersion(info.Serializer, v1.SchemeGroupVersion),
		ns.DecoderToVersion(info.Serializer, v1.SchemeGroupVersion),
		partialSerializer{ns}.DecoderToVersion(info.Serializer, v1.SchemeGroupVersion)
}

// projection is what decodePartialPod keeps of a fully decoded pod: the fields Slim reads (each of them whole,
// as Slim picks among them) and the two kept annotations.
func projection(p *v1.Pod) *v1.Pod {
	out := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Labels: p.Labels, OwnerReferences: p.OwnerReferences,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp}}
	for k, v := range p.Annotations {
		if keptAnnotations[k] {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.NodeName = p.Spec.NodeName
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, v1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	out.Status.Phase, out.Status.Conditions = p.Status.Phase, p.Status.Conditions
	keep := func(css []v1.ContainerStatus) (kept []v1.ContainerStatus) {
		for _, cs := range css {
			kept = append(kept, v1.ContainerStatus{Name: cs.Name, State: cs.State, RestartCount: cs.RestartCount})
		}
		return kept
	}
	out.Status.ContainerStatuses, out.Status.InitContainerStatuses = keep(p.Status.ContainerStatuses), keep(p.Status.InitContainerStatuses)
	return out
}

// randomPods returns n pods filled at random (apimachinery's API fuzzer, as its round-trip tests use it), with
// what Slim looks for mixed in where chance would not put it: Ready and PodScheduled conditions, sidecar init
// containers and their statuses, waiting and terminated states, restarts, the deletion-cost annotation and a
// bookmark's initial-events-end.
func randomPods(seed int64, n int) []*v1.Pod {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), scheme.Codecs).NilChance(0.2).NumElements(0, 3)
	r := rand.New(rand.NewSource(seed))
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := &v1.Pod{}
		f.Fill(p)
		p.TypeMeta = metav1.TypeMeta{}
		for j := range p.Status.Conditions {
			p.Status.Conditions[j].Type = []v1.PodConditionType{v1.PodReady, v1.PodScheduled, v1.ContainersReady, "Other"}[r.Intn(4)]
			p.Status.Conditions[j].Status = []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown}[r.Intn(3)]
		}
		always := v1.ContainerRestartPolicyAlways
		for j := range p.Spec.InitContainers {
			if r.Intn(2) == 0 {
				p.Spec.InitContainers[j].RestartPolicy = &always
			}
			if j < len(p.Status.InitContainerStatuses) {
				p.Status.InitContainerStatuses[j].Name = p.Spec.InitContainers[j].Name
			}
		}
		for _, css := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
			for j := range css {
				css[j].RestartCount = int32(r.Intn(3))
				switch r.Intn(3) {
				case 0:
					css[j].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}
				case 1:
					css[j].State.Waiting = nil
					if css[j].State.Terminated != nil {
						css[j].State.Terminated.ExitCode = int32(r.Intn(2))
					}
				}
			}
		}
		if r.Intn(2) == 0 {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[PodDeletionCostAnnotation] = fmt.Sprint(r.Intn(100))
		}
		if r.Intn(5) == 0 {
			p.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		}
		pods[i] = p
	}
	return pods
}

func encode(t testing.TB, enc runtime.Encoder, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPartialDecodeSlimsLikeFullDecode (issue 48): for 2,000 random pods sent as protobuf, the partial decoder gives
// exactly the projection of the full decode onto the fields Slim reads and the kept annotations, and Slim of it is
// Slim of the full pod; into a given pod too.
func TestPartialDecodeSlimsLikeFullDecode(t *testing.T) {
	enc, full, partial := codecs(t)
	for i, p := range randomPods(48, 2000) {
		data := encode(t, enc, p)
		want, _, err := full.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("pod %d: full decode: %v", i, err)
		}
		got, gvk, err := partial.Decode(data, nil, nil)
		if err != nil || gvk == nil || gvk.Kind != "Pod" {
			t.Fatalf("pod %d: partial decode: %v (%v)", i, err, gvk)
		}
		wantPod, gotPod := want.(*v1.Pod), got.(*v1.Pod)
		if w := projection(wantPod); !apiequality.Semantic.DeepEqual(gotPod, w) {
			t.Fatalf("pod %d: partial decode\n%#v\nwant the projection of the full decode\n%#v", i, gotPod, w)
		}
		if g, w := Slim(gotPod), Slim(wantPod); !apiequality.Semantic.DeepEqual(g, w) {
			t.Fatalf("pod %d: Slim of the partial decode\n%#v\nwant Slim of the full decode\n%#v", i, g, w)
		}
		into := &v1.Pod{Spec: v1.PodSpec{NodeName: "left over"}}
		if got, _, err := partial.Decode(data, nil, into); err != nil || got != into || !apiequality.Semantic.DeepEqual(into, gotPod) {
			t.Fatalf("pod %d: into a pod: %v, same object %v, %#v", i, err, got == into, into)
		}
	}
}

// TestPartialDecodeOfLists: a PodList decodes into the given list with its resourceVersion, continue token and
// remaining count, each item partially.
func TestPartialDecodeOfLists(t *testing.T) {
	enc, full, partial := codecs(t)
	left := int64(7)
	list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: &left}}
	for _, p := range randomPods(7, 20) {
		list.Items = append(list.Items, *p)
	}
	data := encode(t, enc, list)
	want := &v1.PodList{}
	if _, _, err := full.Decode(data, nil, want); err != nil {
		t.Fatal(err)
	}
	got := &v1.PodList{Items: []v1.Pod{{}}}
	if obj, _, err := partial.Decode(data, nil, got); err != nil || obj != got {
		t.Fatalf("partial decode: %v, same object %v", err, obj == got)
	}
	if got.ResourceVersion != "42" || got.Continue != "next" || got.RemainingItemCount == nil || *got.RemainingItemCount != 7 || len(got.Items) != 20 {
		t.Fatalf("list meta %+v with %d items; want 42, next, 7 and 20 items", got.ListMeta, len(got.Items))
	}
	for i := range got.Items {
		if w := projection(&want.Items[i]); !apiequality.Semantic.DeepEqual(&got.Items[i], w) {
			t.Fatalf("item %d: %#v\nwant %#v", i, &got.Items[i], w)
		}
	}
}

// TestPartialDecoderLeavesTheRestToTheClient: other kinds, JSON and bytes that are not a well-formed pod get the
// client's own decoder, and its answer (the full object, or its error).
func TestPartialDecoderLeavesTheRestToTheClient(t *testing.T) {
	enc, full, partial := codecs(t)
	status := &metav1.Status{Status: metav1.StatusFailure, Message: "gone", Code: 410}
	got, _, err := partial.Decode(encode(t, enc, status), nil, nil)
	if s, ok := got.(*metav1.Status); err != nil || !ok || s.Message != "gone" {
		t.Errorf("a Status: %#v, %v; want the Status", got, err)
	}
	json := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`)
	jsonInfo, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	jsonPartial := partialSerializer{rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()}.
		DecoderToVersion(jsonInfo.Serializer, v1.SchemeGroupVersion) // what the client negotiates for a JSON answer
	got, _, err = jsonPartial.Decode(json, nil, nil)
	if p, ok := got.(*v1.Pod); err != nil || !ok || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx" {
		t.Errorf("JSON: %#v, %v; want the whole pod, as the client decodes it", got, err)
	}
	// A pod whose status field holds a varint where a message belongs: the client decoder's error, not a guess.
	var raw, typeMeta, unknown []byte
	raw = protowire.AppendVarint(protowire.AppendTag(raw, podStatus, protowire.VarintType), 1)
	typeMeta = protowire.AppendString(protowire.AppendTag(typeMeta, typeAPIVersion, protowire.BytesType), "v1")
	typeMeta = protowire.AppendString(protowire.AppendTag(typeMeta, typeKind, protowire.BytesType), "Pod")
	unknown = protowire.AppendBytes(protowire.AppendTag(unknown, unknownTypeMeta, protowire.BytesType), typeMeta)
	unknown = protowire.AppendBytes(protowire.AppendTag(unknown, unknownRaw, protowire.BytesType), raw)
	bad := append(append([]byte{}, protobufMagic...), unknown...)
	_, _, wantErr := full.Decode(bad, nil, nil)
	if _, _, err := partial.Decode(bad, nil, nil); wantErr == nil || err == nil || err.Error() != wantErr.Error() {
		t.Errorf("a malformed pod: error %v; want the client decoder's %v", err, wantErr)
	}
}

// BenchmarkDecodePod compares the two decoders, each followed by Slim as the informer's Transform runs it, on a pod
// as kube-apiserver sends one of a Deployment running on a KWOK node (apiPod: defaulted spec, managed fields,
// conditions, container statuses).
func BenchmarkDecodePod(b *testing.B) {
	enc, full, partial := codecs(b)
	data := encode(b, enc, apiPod(1))
	for _, bc := range []struct {
		name string
		dec  runtime.Decoder
		then func(*v1.Pod) *v1.Pod
	}{{"full+Slim", full, Slim}, {"partial+Slim", partial, Slim}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := bc.dec.Decode(data, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				bc.then(obj.(*v1.Pod))
			}
		})
	}
}
