// Package futurewire writes Kubernetes protobuf as an API server newer than kubedeploy's compiled API would: objects
// whose messages carry fields this build has no number for (IM-8). Tests use it to feed kubedeploy's informers the
// bytes such a server sends: a response body or watch event is rewritten object by object, and AppendField adds a
// field to one object's message. Nothing here is used outside tests.
package futurewire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// magic starts every protobuf-encoded object (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var magic = []byte("k8s\x00")

// FieldNumber is the field AppendField adds: far above any field an apps/v1 or core/v1 message has.
const FieldNumber protowire.Number = 1000

// listItems is the field number of a List's items in every Kubernetes list type.
const listItems protowire.Number = 2

// AppendField returns msg, one object's protobuf message, with a length-delimited field FieldNumber holding value
// appended to the message reached through path (field numbers of nested messages from msg's root; none: msg itself;
// the last occurrence of each): a field kubedeploy's generated code skips when decoding. PodSpec is the path to a
// pod template's spec. When path does not lead to a message, msg is returned
// unchanged.
func AppendField(msg []byte, value string, path ...protowire.Number) []byte {
	if len(path) == 0 {
		out := append([]byte(nil), msg...)
		out = protowire.AppendTag(out, FieldNumber, protowire.BytesType)
		return protowire.AppendBytes(out, []byte(value))
	}
	var out []byte
	found := -1
	for rest := msg; len(rest) > 0; {
		num, typ, tagLen := protowire.ConsumeTag(rest)
		if tagLen < 0 {
			return msg
		}
		valLen := protowire.ConsumeFieldValue(num, typ, rest[tagLen:])
		if valLen < 0 {
			return msg
		}
		if num == path[0] && typ == protowire.BytesType {
			found = len(msg) - len(rest)
		}
		rest = rest[tagLen+valLen:]
	}
	if found < 0 {
		return msg
	}
	out = append(out, msg[:found]...)
	num, typ, tagLen := protowire.ConsumeTag(msg[found:])
	inner, valLen := protowire.ConsumeBytes(msg[found+tagLen:])
	out = protowire.AppendTag(out, num, typ)
	out = protowire.AppendBytes(out, AppendField(inner, value, path[1:]...))
	return append(out, msg[found+tagLen+valLen:]...)
}

// PodSpec is the path to the pod template's spec (PodSpec) in a Deployment or a ReplicaSet: spec (2), then template
// (3 in both), then spec (2).
var PodSpec = []protowire.Number{2, 3, 2}

// Rewrite returns body, a protobuf response (the magic, then a runtime.Unknown envelope), with each object's
// message replaced by fn's result: the object itself, or each item of a list (a kind ending in "List"). fn gets
// the envelope's kind without "List". The error says what in body is not well-formed.
func Rewrite(body []byte, fn func(kind string, msg []byte) []byte) ([]byte, error) {
	raw, ok := bytes.CutPrefix(body, magic)
	if !ok {
		return nil, errors.New("futurewire: not a protobuf object (no magic)")
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("futurewire: decoding the envelope: %w", err)
	}
	if kind, isList := strings.CutSuffix(unk.Kind, "List"); isList {
		items, err := rewriteItems(unk.Raw, func(msg []byte) []byte { return fn(kind, msg) })
		if err != nil {
			return nil, err
		}
		unk.Raw = items
	} else {
		unk.Raw = fn(unk.Kind, unk.Raw)
	}
	out, err := unk.Marshal()
	if err != nil {
		return nil, fmt.Errorf("futurewire: encoding the envelope: %w", err)
	}
	return append(append([]byte(nil), magic...), out...), nil
}

// rewriteItems copies list, a List message, with each item's message replaced by fn's result.
func rewriteItems(list []byte, fn func([]byte) []byte) ([]byte, error) {
	var out []byte
	for len(list) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(list)
		if tagLen < 0 {
			return nil, fmt.Errorf("futurewire: list: %w", protowire.ParseError(tagLen))
		}
		valLen := protowire.ConsumeFieldValue(num, typ, list[tagLen:])
		if valLen < 0 {
			return nil, fmt.Errorf("futurewire: list field %d: %w", num, protowire.ParseError(valLen))
		}
		if num == listItems && typ == protowire.BytesType {
			item, _ := protowire.ConsumeBytes(list[tagLen:])
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendBytes(out, fn(item))
		} else {
			out = append(out, list[:tagLen+valLen]...)
		}
		list = list[tagLen+valLen:]
	}
	return out, nil
}

// RewriteWatch copies a protobuf watch stream (length-prefixed metav1.WatchEvent frames) from r to w, rewriting
// each event's object with Rewrite and fn, until r ends (nil at a frame boundary) or a frame is not well-formed.
func RewriteWatch(w io.Writer, r io.Reader, fn func(kind string, msg []byte) []byte) error {
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return err
		}
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(frame); err != nil {
			return fmt.Errorf("futurewire: decoding a watch event: %w", err)
		}
		if len(ev.Object.Raw) > 0 {
			raw, err := Rewrite(ev.Object.Raw, fn)
			if err != nil {
				return err
			}
			ev.Object.Raw = raw
		}
		out, err := ev.Marshal()
		if err != nil {
			return fmt.Errorf("futurewire: encoding a watch event: %w", err)
		}
		binary.BigEndian.PutUint32(size[:], uint32(len(out)))
		if _, err := w.Write(append(size[:], out...)); err != nil {
			return err
		}
	}
}
