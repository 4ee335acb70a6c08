package rawtemplate

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/testing/futurewire"
)

// protobufOf encodes obj as the API server sends it as application/vnd.kubernetes.protobuf.
func protobufOf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var b strings.Builder
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, appsv1.SchemeGroupVersion).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// checking returns the decoder NewInformer's client decodes with, for media type mediaType.
func checking(t *testing.T, s *Store, mediaType string) runtime.Decoder {
	t.Helper()
	codecs := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	return checkingSerializer{NegotiatedSerializer: codecs, store: s}.DecoderToVersion(info.Serializer, appsv1.SchemeGroupVersion)
}

// withFutureField is futurewire's rewrite that gives the objects named in names a field kubedeploy does not know.
func withFutureField(names ...string) func(kind string, msg []byte) []byte {
	return func(kind string, msg []byte) []byte {
		var m metav1.PartialObjectMetadata // metadata is field 1 of every object; the rest is skipped
		if err := m.Unmarshal(msg); err == nil && (len(names) == 0 || slices.Contains(names, m.Name)) {
			return futurewire.AppendField(msg, "future", futurewire.PodSpec...)
		}
		return msg
	}
}

func unread(s *Store, obj metav1.Object) bool {
	e, _ := s.entryFor(obj)
	return e != nil && e.unread
}

// TestProtobufUnknownFieldsMarkUnread (IM-8): a ReplicaSet decoded from the protobuf the API server sends is noted
// as unread exactly when its message carries a field kubedeploy's API lacks, alone or as one item of a list (an
// event of the same generation without it, the field gone from status, clears it); the typed object is the same
// either way; JSON from a server that speaks nothing else is checked strictly.
func TestProtobufUnknownFieldsMarkUnread(t *testing.T) {
	s := NewStore(klog.Background(), nil)
	dec := checking(t, s, runtime.ContentTypeProtobuf)
	known := protobufOf(t, sampleReplicaSet())
	future, err := futurewire.Rewrite(known, withFutureField())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		data   []byte
		unread bool
	}{{"known", known, false}, {"future", future, true}, {"known again, same generation", known, false}} {
		obj, _, err := dec.Decode(c.data, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rs := obj.(*appsv1.ReplicaSet)
		if !reflect.DeepEqual(rs.Spec, sampleReplicaSet().Spec) {
			t.Errorf("%s: decoded spec differs from the object sent", c.name)
		}
		if got := unread(s, rs); got != c.unread {
			t.Errorf("%s: unread = %v, want %v", c.name, got, c.unread)
		}
	}

	// A list: only the item with the field is unread.
	a, b := sampleReplicaSet(), sampleReplicaSet()
	a.Name, a.UID, b.Name, b.UID = "a", "ua", "b", "ub"
	list := &appsv1.ReplicaSetList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"}, Items: []appsv1.ReplicaSet{*a, *b}}
	data, err := futurewire.Rewrite(protobufOf(t, list), withFutureField("b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dec.Decode(data, nil, &appsv1.ReplicaSetList{}); err != nil {
		t.Fatal(err)
	}
	if unread(s, a) || !unread(s, b) {
		t.Errorf("list: unread a %v, b %v; want false, true", unread(s, a), unread(s, b))
	}

	// JSON: checked strictly.
	jsonDec := checking(t, s, runtime.ContentTypeJSON)
	plain, _ := json.Marshal(sampleReplicaSet())
	c := sampleReplicaSet()
	c.UID = "uc"
	withField, _ := json.Marshal(c)
	withField = []byte(strings.Replace(string(withField), `"spec":{`, `"spec":{"someFutureField":1,`, 1))
	if _, _, err := jsonDec.Decode(plain, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := jsonDec.Decode(withField, nil, nil); err != nil {
		t.Fatal(err)
	}
	if unread(s, c) != true {
		t.Error("JSON with an unknown field: not unread")
	}
}

// storedDeployment returns a Store reading through a fake dynamic client that holds deploymentJSON's Deployment
// ns/web (uid u1, generation 4, unknown template fields), and that Deployment as a typed informer would have it.
func storedDeployment(t *testing.T) (*Store, *dynamicfake.FakeDynamicClient, *appsv1.Deployment) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), deploymentJSON(t, 4, "strict", false))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Generation: 4}}
	return NewStore(klog.Background(), client), client, d
}

// TestObserveKeepsWhatIsKnown: a newer generation replaces what is noted, an older one never does; once an object
// is read (Resolve), later events of the same generation and spec bytes (status updates, resyncs) leave it read,
// while other spec bytes at that generation (a newer server defaulting a new field after an upgrade) make it unread
// again.
func TestObserveKeepsWhatIsKnown(t *testing.T) {
	ctx := context.Background()
	s, _, d := storedDeployment(t)
	s.observe(Deployments, d, specCheck{unknown: true, digest: 1})
	older := d.DeepCopy()
	older.Generation--
	s.observe(Deployments, older, specCheck{})
	if !unread(s, d) {
		t.Error("an older generation's event replaced the newer entry")
	}
	if err := s.Resolve(ctx, d); err != nil {
		t.Fatal(err)
	}
	s.observe(Deployments, d, specCheck{unknown: true, digest: 1})
	if unread(s, d) || s.Fingerprint(d) == "" {
		t.Errorf("an event of the spec already read: unread %v, fingerprint %q", unread(s, d), s.Fingerprint(d))
	}
	s.observe(Deployments, d, specCheck{unknown: true, digest: 2})
	if !unread(s, d) {
		t.Error("other spec bytes at the same generation did not make it unread")
	}
	s.observe(Deployments, d, specCheck{})
	if unread(s, d) || s.Fingerprint(d) != "" {
		t.Error("a spec without unknown fields left something noted")
	}
}

// TestResolveReadsUnreadAsJSON (IM-8): Resolve reads an unread object through the dynamic client and notes its
// stored template; an object not unread costs no read; a read of another generation or another object of the name
// is ErrStale; without a client it is an error.
func TestResolveReadsUnreadAsJSON(t *testing.T) {
	ctx := context.Background()
	s, client, d := storedDeployment(t)

	s.observe(Deployments, d, specCheck{})
	if err := s.Resolve(ctx, d); err != nil || len(client.Actions()) != 0 {
		t.Fatalf("Resolve of an object without unknown fields: %v, %d reads; want nil, 0", err, len(client.Actions()))
	}
	if s.Fingerprint(d) != "" {
		t.Error("fingerprint of an object without unknown fields")
	}

	s.observe(Deployments, d, specCheck{unknown: true, digest: 1})
	if fp := s.Fingerprint(d); fp == "" || strings.Contains(fp, "strict") {
		t.Errorf("fingerprint of an unread object = %q, want one that equals no other", fp)
	}
	tmpl, err := s.Template(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Field(tmpl, "spec.someFutureField.mode"); v != "strict" {
		t.Errorf("Template after Resolve lacks the stored field: %v", tmpl)
	}
	if fp := s.Fingerprint(d); !strings.Contains(fp, `spec.someFutureField={"mode":"strict"}`) {
		t.Errorf("fingerprint after Resolve = %q", fp)
	}
	reads := len(client.Actions())
	if _, err := s.Template(ctx, d); err != nil || len(client.Actions()) != reads {
		t.Errorf("a second Template read again (%d reads, was %d): %v", len(client.Actions()), reads, err)
	}

	// The informer is behind: it has generation 3, the server 4.
	s.Forget(d)
	older := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Generation: 3}}
	s.observe(Deployments, older, specCheck{unknown: true, digest: 1})
	if err := s.Resolve(ctx, older); !errors.Is(err, ErrStale) {
		t.Errorf("Resolve of generation 3, server at 4: err %v, want ErrStale", err)
	}
	// The object was deleted and another made under its name.
	replaced := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u8", Generation: 4}}
	s.observe(Deployments, replaced, specCheck{unknown: true, digest: 1})
	if err := s.Resolve(ctx, replaced); !errors.Is(err, ErrStale) {
		t.Errorf("Resolve of a replaced object: err %v, want ErrStale", err)
	}

	none := NewStore(klog.Background(), nil)
	none.observe(Deployments, d, specCheck{unknown: true, digest: 1})
	if err := none.Resolve(ctx, d); err == nil || !strings.Contains(err.Error(), "no client") {
		t.Errorf("Resolve without a client: %v", err)
	}
}

// TestInformerClientChecksListsAndWatches: the client NewInformer lists and watches with decodes both through the
// check (client-go's negotiation picks the wrapped decoder for responses and for each watch event).
func TestInformerClientChecksListsAndWatches(t *testing.T) {
	a, b := sampleReplicaSet(), sampleReplicaSet()
	a.Name, a.UID, b.Name, b.UID = "a", "ua", "b", "ub"
	list := &appsv1.ReplicaSetList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"}, Items: []appsv1.ReplicaSet{*a}}
	listBody, err := futurewire.Rewrite(protobufOf(t, list), withFutureField("a"))
	if err != nil {
		t.Fatal(err)
	}
	eventObj, err := futurewire.Rewrite(protobufOf(t, b), withFutureField("b"))
	if err != nil {
		t.Fatal(err)
	}
	frame, err := (&metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: eventObj}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
			http.Error(w, "want protobuf", http.StatusNotAcceptable)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
			_ = binary.Write(w, binary.BigEndian, uint32(len(frame)))
			_, _ = w.Write(frame)
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(listBody)
	}))
	defer srv.Close()

	s := NewStore(klog.Background(), nil)
	client, err := s.appsClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := client.AppsV1().ReplicaSets("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if got, ok := ev.Object.(*appsv1.ReplicaSet); !ok || got.Name != "b" {
		t.Fatalf("watch event = %+v", ev)
	}
	if !unread(s, a) || !unread(s, b) {
		t.Errorf("unread: listed a %v, watched b %v; want both", unread(s, a), unread(s, b))
	}
}
