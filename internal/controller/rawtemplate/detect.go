package rawtemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kjson "sigs.k8s.io/json"
)

// protobufMagic starts every object the API server sends as application/vnd.kubernetes.protobuf: the bytes of a
// runtime.Unknown envelope follow (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte("k8s\x00")

// Protobuf field numbers read here: runtime.Unknown's raw (the object's own message), a List's items (in every
// apps/v1 list type) and an object's spec.
const (
	unknownRawField protowire.Number = 2
	listItemsField  protowire.Number = 2
	objectSpecField protowire.Number = 2 // Deployment.spec, ReplicaSet.spec
)

// NewInformer returns a shared informer of example's kind (*appsv1.Deployment or *appsv1.ReplicaSet; all
// namespaces, a namespace index, resync period resync, 0 for none) that lists and watches through an apps/v1 client
// built from cfg: protobuf, as the typed clients, sharing cfg's rate limiter. Every object it decodes is checked,
// on the bytes the API server sent, for spec fields kubedeploy's API does not know: protobuf decoding skips such
// fields, so a spec message longer than the typed spec's encoding has some (JSON, from a server or proxy that speaks
// nothing else, is decoded strictly). Such an object is noted as unread at its generation; Resolve reads it as JSON
// when a controller needs its template. Deletes reach s.Forget. A non-nil scoped restricts the informer's list and
// watch to some namespaces (sharded mode, SH-4: shard.Scope.ListWatch). Errors are rest.RESTClientFor's (a
// configuration it rejects) or client-go's event-handler registration.
//
// On a cluster of kubedeploy's own version no object has unknown fields, and the check costs a length comparison
// per object (BenchmarkDecodeProtobufChecked).
func (s *Store) NewInformer(cfg *rest.Config, example runtime.Object, resync time.Duration, scoped func(cache.ListerWatcher) cache.ListerWatcher) (cache.SharedIndexInformer, error) {
	return s.newInformer(cfg, example, resync, metav1.NamespaceAll, scoped)
}

// newInformer is NewInformer over namespace ("" for all).
func (s *Store) newInformer(cfg *rest.Config, example runtime.Object, resync time.Duration, namespace string, scoped func(cache.ListerWatcher) cache.ListerWatcher) (cache.SharedIndexInformer, error) {
	client, err := s.appsClient(cfg)
	if err != nil {
		return nil, err
	}
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	var inf cache.SharedIndexInformer
	switch example.(type) {
	case *appsv1.Deployment, *appsv1.ReplicaSet:
		if scoped != nil {
			inf = cache.NewSharedIndexInformer(scoped(appsListWatch(client, example, namespace)), example, resync, indexers)
		} else if _, ok := example.(*appsv1.Deployment); ok {
			inf = appsinformers.NewDeploymentInformer(client, namespace, resync, indexers)
		} else {
			inf = appsinformers.NewReplicaSetInformer(client, namespace, resync, indexers)
		}
	default:
		return nil, fmt.Errorf("rawtemplate: no informer for %T", example)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.Forget}); err != nil {
		return nil, fmt.Errorf("watching %T deletes: %w", example, err)
	}
	return inf, nil
}

// appsListWatch lists and watches example's kind (Deployment or ReplicaSet) in namespace ("" for all) through
// client.
func appsListWatch(client kubernetes.Interface, example runtime.Object, namespace string) *cache.ListWatch {
	if _, ok := example.(*appsv1.Deployment); ok {
		return &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.AppsV1().Deployments(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.AppsV1().Deployments(namespace).Watch(ctx, o)
			},
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().ReplicaSets(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.AppsV1().ReplicaSets(namespace).Watch(ctx, o)
		},
	}
}

// Informers is NewInformer for both kinds, registered in factory so that every controller and collector asking
// factory for a Deployment or ReplicaSet informer gets the checked one. Call it before anything asks factory for
// either; scoped is NewInformer's. The errors are NewInformer's.
func (s *Store) Informers(factory informers.SharedInformerFactory, cfg *rest.Config, scoped func(cache.ListerWatcher) cache.ListerWatcher) error {
	return s.informers(factory, cfg, metav1.NamespaceAll, scoped)
}

// InformersIn is Informers over one namespace ("" for all), for a factory made for it (observe mode's
// `observe --once -n NAMESPACE`, which may read only that namespace). The errors are NewInformer's.
func (s *Store) InformersIn(factory informers.SharedInformerFactory, cfg *rest.Config, namespace string) error {
	return s.informers(factory, cfg, namespace, nil)
}

// informers registers the checked informers of both kinds over namespace in factory.
func (s *Store) informers(factory informers.SharedInformerFactory, cfg *rest.Config, namespace string, scoped func(cache.ListerWatcher) cache.ListerWatcher) error {
	var errs []error
	for _, example := range []runtime.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}} {
		factory.InformerFor(example, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			inf, err := s.newInformer(cfg, example, resync, namespace, scoped)
			if err != nil {
				errs = append(errs, err)
				// The factory wants an informer; this one is never started, as Run returns the error first.
				inf = cache.NewSharedIndexInformer(&cache.ListWatch{}, example, resync, cache.Indexers{})
			}
			return inf
		})
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// appsClient is a clientset whose AppsV1 decodes through checkingSerializer; its other groups are not used.
func (s *Store) appsClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &appsv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = checkingSerializer{
		NegotiatedSerializer: rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(),
		store:                s,
	}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building the apps/v1 client of the Deployment and ReplicaSet informers: %w", err)
	}
	return kubernetes.New(rc), nil
}

// checkingSerializer is a NegotiatedSerializer whose decoders pass each decoded object, with the bytes it came
// from, to store.check.
type checkingSerializer struct {
	runtime.NegotiatedSerializer
	store *Store
}

// DecoderToVersion wraps the inner serializer's decoder; client-go uses it for responses and watch events alike.
func (n checkingSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return checkingDecoder{inner: n.NegotiatedSerializer.DecoderToVersion(d, gv), store: n.store}
}

type checkingDecoder struct {
	inner runtime.Decoder
	store *Store
}

// Decode decodes as the inner decoder does, then checks what it decoded.
func (d checkingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.inner.Decode(data, defaults, into)
	if err == nil {
		d.store.check(data, obj)
	}
	return obj, gvk, err
}

// decoded is one Deployment or ReplicaSet an informer decoded, with what check needs of its typed spec.
type decoded struct {
	obj metav1.Object
	// specSize is the protobuf size of the typed spec; newSpec returns a zero one, for strict JSON decoding.
	specSize int
	newSpec  func() any
}

// specCheck is what check learned of one object's spec from the bytes sent: whether they hold fields the typed spec
// lacks, and a digest of them that tells one such spec from another.
type specCheck struct {
	unknown bool
	digest  uint64
}

// check notes each Deployment or ReplicaSet in obj (one, or a list's items), decoded from data, as unread when its
// spec in data holds more than the typed spec does. Unknown fields elsewhere do not matter: status is written by
// the controllers alone, and metadata only by patches that name their fields.
func (s *Store) check(data []byte, obj runtime.Object) {
	var items []decoded
	var resource schema.GroupVersionResource
	list := false
	switch o := obj.(type) {
	case *appsv1.Deployment:
		items, resource = []decoded{deploymentItem(o)}, Deployments
	case *appsv1.ReplicaSet:
		items, resource = []decoded{replicaSetItem(o)}, ReplicaSets
	case *appsv1.DeploymentList:
		resource, list = Deployments, true
		for i := range o.Items {
			items = append(items, deploymentItem(&o.Items[i]))
		}
	case *appsv1.ReplicaSetList:
		resource, list = ReplicaSets, true
		for i := range o.Items {
			items = append(items, replicaSetItem(&o.Items[i]))
		}
	default:
		return
	}
	checks := checkSpecs(data, items, list)
	for i, item := range items {
		c := specCheck{unknown: true} // bytes that cannot be read that way: suspect
		if checks != nil {
			c = checks[i]
		}
		s.observe(resource, item.obj, c)
	}
}

func deploymentItem(d *appsv1.Deployment) decoded {
	return decoded{obj: d, specSize: d.Spec.Size(), newSpec: func() any { return &appsv1.DeploymentSpec{} }}
}

func replicaSetItem(rs *appsv1.ReplicaSet) decoded {
	return decoded{obj: rs, specSize: rs.Spec.Size(), newSpec: func() any { return &appsv1.ReplicaSetSpec{} }}
}

// checkSpecs checks each item's spec in data; nil when data cannot be read that way (another encoding, or bytes
// that do not line up with items).
func checkSpecs(data []byte, items []decoded, list bool) []specCheck {
	if raw, ok := bytes.CutPrefix(data, protobufMagic); ok {
		return checkProtobuf(raw, items, list)
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return checkJSON(trimmed, items, list)
	}
	return nil
}

// checkProtobuf compares each item's spec message in the runtime.Unknown envelope with the typed spec's Size:
// generated protobuf code skips unknown fields, so a longer message has some. (A shorter one, a newer server
// leaving out a field this build always writes, counts too: reading it as JSON once settles it.)
func checkProtobuf(envelope []byte, items []decoded, list bool) []specCheck {
	raw, ok := field(envelope, unknownRawField)
	if !ok {
		return nil
	}
	msgs := [][]byte{raw}
	if list {
		msgs = repeated(raw, listItemsField)
	}
	if len(msgs) != len(items) {
		return nil
	}
	out := make([]specCheck, len(items))
	for i, item := range items {
		spec, ok := field(msgs[i], objectSpecField)
		if !ok && item.specSize > 0 {
			return nil
		}
		if len(spec) != item.specSize {
			out[i] = specCheck{unknown: true, digest: digest(spec)}
		}
	}
	return out
}

// digest is FNV-1a of b: equal specs (protobuf and JSON encodings are deterministic, map keys sorted) have equal
// digests.
func digest(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// field returns the last occurrence of the length-delimited field num in msg; false if there is none or msg is not
// well-formed protobuf.
func field(msg []byte, num protowire.Number) ([]byte, bool) {
	values := repeated(msg, num)
	if len(values) == 0 {
		return nil, false
	}
	return values[len(values)-1], true
}

// repeated returns every occurrence of the length-delimited field num in msg, in order; nil when msg is not
// well-formed protobuf.
func repeated(msg []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(msg) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(msg)
		if tagLen < 0 {
			return nil
		}
		msg = msg[tagLen:]
		if n == num && typ == protowire.BytesType {
			v, vLen := protowire.ConsumeBytes(msg)
			if vLen < 0 {
				return nil
			}
			out = append(out, v)
			msg = msg[vLen:]
			continue
		}
		vLen := protowire.ConsumeFieldValue(n, typ, msg)
		if vLen < 0 {
			return nil
		}
		msg = msg[vLen:]
	}
	return out
}

// checkJSON decodes each item's spec strictly into a zero typed spec and reports whether that found fields the type
// lacks. Only a server or proxy that does not speak protobuf gets here.
func checkJSON(data []byte, items []decoded, list bool) []specCheck {
	type object struct {
		Spec json.RawMessage `json:"spec"`
	}
	objs := []object{{}}
	if list {
		var l struct {
			Items []object `json:"items"`
		}
		if err := json.Unmarshal(data, &l); err != nil {
			return nil
		}
		objs = l.Items
	} else if err := json.Unmarshal(data, &objs[0]); err != nil {
		return nil
	}
	if len(objs) != len(items) {
		return nil
	}
	out := make([]specCheck, len(items))
	for i, item := range items {
		if len(objs[i].Spec) == 0 {
			continue
		}
		strict, err := kjson.UnmarshalStrict(objs[i].Spec, item.newSpec())
		if err != nil || len(strict) > 0 {
			out[i] = specCheck{unknown: true, digest: digest(objs[i].Spec)}
		}
	}
	return out
}
