package podcache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// within reports whether sub is a slice of b's memory (the decoder aliased it, not copied it).
func within(sub, b []byte) bool {
	if len(sub) == 0 || len(b) == 0 {
		return false
	}
	start, end := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= start && p+uintptr(len(sub)) <= end
}

func TestWatchEventDecodesAsGenerated(t *testing.T) {
	r := rand.New(rand.NewSource(48))
	types := []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", ""}
	for i := range 500 {
		want := metav1.WatchEvent{Type: types[i%len(types)]}
		if i%7 != 0 { // some events without an object at all
			want.Object.Raw = make([]byte, r.Intn(3000))
			r.Read(want.Object.Raw)
		}
		data, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 { // a field a later API version might add: skipped by both
			data = protowire.AppendString(protowire.AppendTag(data, 9, protowire.BytesType), "future")
		}
		var generated, got metav1.WatchEvent
		if err := generated.Unmarshal(data); err != nil {
			t.Fatal(err)
		}
		got.Type = "stale"
		if _, _, err := (watchEventDecoder{}).Decode(data, nil, &got); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Type != generated.Type || !bytes.Equal(got.Object.Raw, generated.Object.Raw) || (got.Object.Raw == nil) != (generated.Object.Raw == nil) {
			t.Fatalf("event %d: got %q and %d bytes (nil %v), generated code %q and %d bytes (nil %v)", i,
				got.Type, len(got.Object.Raw), got.Object.Raw == nil, generated.Type, len(generated.Object.Raw), generated.Object.Raw == nil)
		}
		if len(got.Object.Raw) > 0 && !within(got.Object.Raw, data) {
			t.Fatalf("event %d: the object's bytes were copied, not taken from the frame", i)
		}
	}
}

// failingSerializer stands for the client's own stream serializer: it says it was asked.
type failingSerializer struct{ runtime.Serializer }

var errInner = errors.New("the client's serializer")

func (failingSerializer) Decode([]byte, *schema.GroupVersionKind, runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return nil, nil, errInner
}

func TestWatchEventDecoderLeavesTheRestToTheClient(t *testing.T) {
	d := watchEventDecoder{failingSerializer{}}
	var ev metav1.WatchEvent
	// The object field holding a varint where a message belongs.
	bad := protowire.AppendVarint(protowire.AppendTag(nil, watchEventObject, protowire.VarintType), 3)
	if _, _, err := d.Decode(bad, nil, &ev); err != errInner {
		t.Errorf("a malformed event: %v; want the client's serializer's answer", err)
	}
	if ev.Type != "" || ev.Object.Raw != nil {
		t.Errorf("a malformed event left %#v behind", ev)
	}
	good, _ := (&metav1.WatchEvent{Type: "ADDED"}).Marshal()
	if _, _, err := d.Decode(good, nil, &v1.Pod{}); err != errInner {
		t.Errorf("decoding into a Pod: %v; want the client's serializer's answer", err)
	}
}

// TestWatchThroughNewClient watches pods through NewClient from a server that sends a protobuf watch stream, the
// frames of several events read into the one buffer client-go reuses: every pod arrives whole and as sent.
func TestWatchThroughNewClient(t *testing.T) {
	enc, _, _ := codecs(t)
	const n = 50
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		for i := range n {
			pod := apiPod(i)
			pod.Name = fmt.Sprintf("pod-%03d", i)
			pod.Labels["n"] = fmt.Sprint(i)
			frame, err := (&metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: encode(t, enc, pod)}}).Marshal()
			if err != nil {
				t.Error(err)
				return
			}
			w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
			w.Write(frame)
		}
	}))
	defer srv.Close()
	client, err := NewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var pods []*v1.Pod // all read before any is checked: none may change when later frames arrive
	for i := range n {
		ev := <-w.ResultChan()
		pod, ok := ev.Object.(*v1.Pod)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("event %d: %s %T; want an added pod", i, ev.Type, ev.Object)
		}
		pods = append(pods, pod)
	}
	for i, pod := range pods {
		if want := fmt.Sprintf("pod-%03d", i); pod.Name != want || pod.Labels["n"] != fmt.Sprint(i) || pod.Status.Phase != apiPod(i).Status.Phase {
			t.Fatalf("event %d: pod %s labels %v phase %s; want %s as sent", i, pod.Name, pod.Labels, pod.Status.Phase, want)
		}
	}
}

// BenchmarkWatchEventDecode decodes one frame of a pod watch (apiPod as the API server encodes it) into a
// WatchEvent, as client-go's generated code does and as watchEventDecoder does.
func BenchmarkWatchEventDecode(b *testing.B) {
	enc, _, _ := codecs(b)
	frame, err := (&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: encode(b, enc, apiPod(1))}}).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		decode func(*metav1.WatchEvent) error
	}{
		{"generated", func(ev *metav1.WatchEvent) error { return ev.Unmarshal(frame) }},
		{"aliasing", func(ev *metav1.WatchEvent) error {
			_, _, err := (watchEventDecoder{}).Decode(frame, nil, ev)
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ev metav1.WatchEvent
				if err := bc.decode(&ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
