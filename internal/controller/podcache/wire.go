package podcache

import (
	"bytes"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// This file decodes pods from the bytes the API server sends (application/vnd.kubernetes.protobuf) into pods that
// hold only what Slim reads, instead of decoding every field of a pod and then dropping most of them (issue 48: the
// full decode was 4.7% of the controllers' CPU in a 1,000-replica rollout, and its garbage a good part of their
// collections). The result is not yet slim: the informer's Transform still makes it so, as it does for a pod
// decoded in full, and Slim gives the same pod for both (TestPartialDecodeSlimsLikeFullDecode).

// Protobuf field numbers, from k8s.io/api/core/v1 and k8s.io/apimachinery's generated.proto files.
const (
	unknownTypeMeta protowire.Number = 1 // runtime.Unknown
	unknownRaw      protowire.Number = 2
	typeAPIVersion  protowire.Number = 1 // runtime.TypeMeta
	typeKind        protowire.Number = 2

	listMeta  protowire.Number = 1 // PodList
	listItems protowire.Number = 2
	listRV    protowire.Number = 2 // ListMeta
	listCont  protowire.Number = 3
	listLeft  protowire.Number = 4

	podMetadata protowire.Number = 1 // Pod
	podSpec     protowire.Number = 2
	podStatus   protowire.Number = 3

	metaName        protowire.Number = 1 // ObjectMeta
	metaNamespace   protowire.Number = 3
	metaUID         protowire.Number = 5
	metaRV          protowire.Number = 6
	metaCreated     protowire.Number = 8
	metaDeleted     protowire.Number = 9
	metaLabels      protowire.Number = 11
	metaAnnotations protowire.Number = 12
	metaOwners      protowire.Number = 13
	mapKey          protowire.Number = 1 // a map entry
	mapValue        protowire.Number = 2

	specNodeName       protowire.Number = 10 // PodSpec
	specInitContainers protowire.Number = 20
	containerName      protowire.Number = 1 // Container
	containerRestart   protowire.Number = 24

	statusPhase          protowire.Number = 1 // PodStatus
	statusConditions     protowire.Number = 2
	statusContainers     protowire.Number = 8
	statusInitContainers protowire.Number = 10
	csName               protowire.Number = 1 // ContainerStatus
	csState              protowire.Number = 2
	csRestartCount       protowire.Number = 5
)

// errWireType is returned for a field whose wire type is not its message's: the full decoder then has its say.
var errWireType = errors.New("unexpected protobuf wire type")

// field is one field of a protobuf message: its number, wire type and value (a varint's, or a length-delimited
// field's bytes).
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

// str returns f's bytes as a new string, or errWireType if f is not length-delimited.
func (f field) str() (string, error) {
	if f.typ != protowire.BytesType {
		return "", errWireType
	}
	return string(f.bytes), nil
}

// msg returns f's bytes (an embedded message), or errWireType if f is not length-delimited.
func (f field) msg() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, errWireType
	}
	return f.bytes, nil
}

// eachField calls visit for every field of the message b, in order, and returns the first error of the bytes or
// of visit. Fields of the groups wire type, which Kubernetes messages never use, are an error.
func eachField(b []byte, visit func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n = protowire.ConsumeFieldValue(num, typ, b)
		default:
			return errWireType
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := visit(f); err != nil {
			return err
		}
	}
	return nil
}

// decodePartialPod decodes b, a Pod message, into pod (which it resets) with only the fields Slim reads, the
// initial-events-end annotation of a watch bookmark (which client-go's reflector reads before any Transform) and
// nothing else. It returns an error for bytes that are not a well-formed Pod.
func decodePartialPod(b []byte, pod *v1.Pod) error {
	*pod = v1.Pod{}
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case podMetadata:
			var m []byte
			if m, err = f.msg(); err == nil {
				err = decodeMeta(m, &pod.ObjectMeta)
			}
		case podSpec:
			var m []byte
			if m, err = f.msg(); err == nil {
				err = decodeSpec(m, &pod.Spec)
			}
		case podStatus:
			var m []byte
			if m, err = f.msg(); err == nil {
				err = decodeStatus(m, &pod.Status)
			}
		}
		return err
	})
}

// keptAnnotations are the annotations decodePartialPod keeps.
var keptAnnotations = map[string]bool{PodDeletionCostAnnotation: true, metav1.InitialEventsAnnotationKey: true}

func decodeMeta(b []byte, m *metav1.ObjectMeta) error {
	return eachField(b, func(f field) error {
		var err error
		var s string
		switch f.num {
		case metaName:
			m.Name, err = f.str()
		case metaNamespace:
			m.Namespace, err = f.str()
		case metaUID:
			s, err = f.str()
			m.UID = types.UID(s)
		case metaRV:
			m.ResourceVersion, err = f.str()
		case metaCreated:
			var t []byte
			if t, err = f.msg(); err == nil {
				err = m.CreationTimestamp.Unmarshal(t)
			}
		case metaDeleted:
			var t []byte
			if t, err = f.msg(); err == nil {
				m.DeletionTimestamp = &metav1.Time{}
				err = m.DeletionTimestamp.Unmarshal(t)
			}
		case metaLabels:
			var k, v string
			if k, v, err = decodeMapEntry(f); err == nil {
				if m.Labels == nil {
					m.Labels = map[string]string{}
				}
				m.Labels[k] = v
			}
		case metaAnnotations:
			var k, v string
			if k, v, err = decodeMapEntry(f); err == nil && keptAnnotations[k] {
				if m.Annotations == nil {
					m.Annotations = map[string]string{}
				}
				m.Annotations[k] = v
			}
		case metaOwners:
			var r []byte
			if r, err = f.msg(); err == nil {
				var ref metav1.OwnerReference
				if err = ref.Unmarshal(r); err == nil {
					m.OwnerReferences = append(m.OwnerReferences, ref)
				}
			}
		}
		return err
	})
}

// decodeMapEntry returns the key and value of f, an entry of a map<string, string> field (a missing key or value
// is "", as the generated decoders read it).
func decodeMapEntry(f field) (k, v string, err error) {
	b, err := f.msg()
	if err != nil {
		return "", "", err
	}
	err = eachField(b, func(e field) error {
		var err error
		switch e.num {
		case mapKey:
			k, err = e.str()
		case mapValue:
			v, err = e.str()
		}
		return err
	})
	return k, v, err
}

func decodeSpec(b []byte, spec *v1.PodSpec) error {
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case specNodeName:
			spec.NodeName, err = f.str()
		case specInitContainers:
			var m []byte
			if m, err = f.msg(); err == nil {
				var c v1.Container
				if err = decodeContainer(m, &c); err == nil {
					spec.InitContainers = append(spec.InitContainers, c)
				}
			}
		}
		return err
	})
}

// decodeContainer keeps a container's name and restartPolicy (which init containers are sidecars, RS-14 rule 7).
func decodeContainer(b []byte, c *v1.Container) error {
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case containerName:
			c.Name, err = f.str()
		case containerRestart:
			var s string
			if s, err = f.str(); err == nil {
				p := v1.ContainerRestartPolicy(s)
				c.RestartPolicy = &p
			}
		}
		return err
	})
}

func decodeStatus(b []byte, status *v1.PodStatus) error {
	return eachField(b, func(f field) error {
		var err error
		var m []byte
		switch f.num {
		case statusPhase:
			var s string
			s, err = f.str()
			status.Phase = v1.PodPhase(s)
		case statusConditions:
			if m, err = f.msg(); err == nil {
				var c v1.PodCondition
				if err = c.Unmarshal(m); err == nil {
					status.Conditions = append(status.Conditions, c)
				}
			}
		case statusContainers, statusInitContainers:
			if m, err = f.msg(); err == nil {
				var cs v1.ContainerStatus
				if err = decodeContainerStatus(m, &cs); err == nil {
					if f.num == statusContainers {
						status.ContainerStatuses = append(status.ContainerStatuses, cs)
					} else {
						status.InitContainerStatuses = append(status.InitContainerStatuses, cs)
					}
				}
			}
		}
		return err
	})
}

// decodeContainerStatus keeps a container status's name, state and restartCount.
func decodeContainerStatus(b []byte, cs *v1.ContainerStatus) error {
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case csName:
			cs.Name, err = f.str()
		case csState:
			var m []byte
			if m, err = f.msg(); err == nil {
				err = cs.State.Unmarshal(m)
			}
		case csRestartCount:
			if f.typ != protowire.VarintType {
				return errWireType
			}
			cs.RestartCount = int32(f.varint)
		}
		return err
	})
}

// decodePartialPodList decodes b, a PodList message, into list (which it resets): its resourceVersion, continue
// token and remaining item count, and each item as decodePartialPod does.
func decodePartialPodList(b []byte, list *v1.PodList) error {
	*list = v1.PodList{}
	return eachField(b, func(f field) error {
		m, err := f.msg()
		switch {
		case f.num != listMeta && f.num != listItems:
			return nil
		case err != nil:
			return err
		case f.num == listItems:
			list.Items = append(list.Items, v1.Pod{})
			return decodePartialPod(m, &list.Items[len(list.Items)-1])
		}
		return eachField(m, func(f field) error {
			var err error
			switch f.num {
			case listRV:
				list.ResourceVersion, err = f.str()
			case listCont:
				list.Continue, err = f.str()
			case listLeft:
				if f.typ != protowire.VarintType {
					return errWireType
				}
				n := int64(f.varint)
				list.RemainingItemCount = &n
			}
			return err
		})
	})
}

// protobufMagic starts every object the API server sends as application/vnd.kubernetes.protobuf: the bytes of a
// runtime.Unknown envelope follow (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte("k8s\x00")

// envelope returns the kind and apiVersion of data, a protobuf-encoded object, and the object's own message; ok
// is false for anything else.
func envelope(data []byte) (kind, apiVersion string, raw []byte, ok bool) {
	rest, found := bytes.CutPrefix(data, protobufMagic)
	if !found {
		return "", "", nil, false
	}
	err := eachField(rest, func(f field) error {
		var err error
		var m []byte
		switch f.num {
		case unknownTypeMeta:
			if m, err = f.msg(); err == nil {
				err = eachField(m, func(t field) error {
					var err error
					switch t.num {
					case typeAPIVersion:
						apiVersion, err = t.str()
					case typeKind:
						kind, err = t.str()
					}
					return err
				})
			}
		case unknownRaw:
			raw, err = f.msg()
		}
		return err
	})
	return kind, apiVersion, raw, err == nil
}

// partialDecoder decodes core/v1 Pods and PodLists sent as protobuf with decodePartialPod; anything else (JSON,
// other kinds, bytes it cannot read) goes to inner, the client's own decoder, whose answer stands.
type partialDecoder struct {
	inner runtime.Decoder
}

// Decode implements runtime.Decoder. into may be nil (a watch event's object), a *v1.Pod or a *v1.PodList (a
// list's response); it is filled and returned.
func (d partialDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	kind, apiVersion, raw, ok := envelope(data)
	if ok && apiVersion == "v1" {
		switch kind {
		case "Pod":
			pod, isPod := into.(*v1.Pod)
			if into == nil {
				pod, isPod = &v1.Pod{}, true
			}
			if isPod && decodePartialPod(raw, pod) == nil {
				return pod, &schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, nil
			}
		case "PodList":
			if list, isList := into.(*v1.PodList); isList && decodePartialPodList(raw, list) == nil {
				return list, &schema.GroupVersionKind{Version: "v1", Kind: "PodList"}, nil
			}
		}
	}
	return d.inner.Decode(data, defaults, into)
}

// partialSerializer is a NegotiatedSerializer whose decoders are partialDecoders over the inner serializer's.
type partialSerializer struct {
	runtime.NegotiatedSerializer
}

// DecoderToVersion wraps the inner serializer's decoder; client-go uses it for responses and watch events alike.
func (n partialSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return partialDecoder{inner: n.NegotiatedSerializer.DecoderToVersion(d, gv)}
}
