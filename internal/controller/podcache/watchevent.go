package podcache

import (
	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A watch's protobuf stream is a sequence of frames, each a metav1.WatchEvent whose object is the encoded pod.
// client-go decodes a frame into a new WatchEvent, which copies the pod's bytes out of the frame
// (RawExtension.Unmarshal: 8.6% of the bytes the controllers allocated in a 1,000-replica rolling update, issue 48),
// then decodes the pod from that copy and drops it. watchEventDecoder points the event's object at the pod's bytes
// inside the frame instead: client-go (rest/watch.Decoder) decodes the object before it reads the next frame into
// the same buffer, and every decoder behind it (decodePartialPod, the generated protobuf code) copies what it keeps.

// Protobuf field numbers of metav1.WatchEvent and runtime.RawExtension (k8s.io/apimachinery's generated.proto).
const (
	watchEventType   protowire.Number = 1
	watchEventObject protowire.Number = 2
	rawExtensionRaw  protowire.Number = 1
)

// watchEventDecoder is the protobuf stream serializer of the pod informers' client: it decodes frames into a
// *metav1.WatchEvent without copying the object's bytes; anything else (another target type, bytes it cannot
// read) goes to the inner serializer, whose answer stands.
type watchEventDecoder struct {
	runtime.Serializer
}

// Decode implements runtime.Decoder. For into a *metav1.WatchEvent (client-go's watch decoder) it sets Type and
// Object.Raw, the latter a slice of data, valid until data is reused; the returned kind is v1 WatchEvent.
func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok {
		*ev = metav1.WatchEvent{}
		if decodeWatchEvent(data, ev) == nil {
			return ev, &schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}, nil
		}
		*ev = metav1.WatchEvent{}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// decodeWatchEvent decodes b, a WatchEvent message, into ev, its object's bytes aliasing b. Unknown fields are
// skipped, as the generated code skips them; a field of the wrong wire type or malformed bytes are an error.
func decodeWatchEvent(b []byte, ev *metav1.WatchEvent) error {
	return eachField(b, func(f field) error {
		var err error
		var m []byte
		switch f.num {
		case watchEventType:
			ev.Type, err = f.str()
		case watchEventObject:
			if m, err = f.msg(); err == nil {
				err = eachField(m, func(r field) error {
					var err error
					if r.num == rawExtensionRaw {
						ev.Object.Raw, err = r.msg()
					}
					return err
				})
			}
		}
		return err
	})
}

// SupportedMediaTypes returns the inner serializer's media types, the protobuf one's stream serializer wrapped in
// a watchEventDecoder.
func (n partialSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := n.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf && info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = watchEventDecoder{stream.Serializer}
			info.StreamSerializer = &stream
		}
		out[i] = info
	}
	return out
}
