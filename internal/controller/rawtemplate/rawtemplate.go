// Package rawtemplate carries pod templates through kubedeploy exactly as the API server stored them, fields
// kubedeploy's compiled API does not know included, and finds the Deployment fields it must refuse (IM-8).
//
// kubedeploy is built against one k8s.io/api and runs against API servers that may be newer. A typed informer
// decodes each Deployment and ReplicaSet into kubedeploy's Go structs and so drops every field those structs lack;
// a ReplicaSet or pod built from such a template would silently lose it (kubernetes#129511). The informers here
// (Store.NewInformer) stay typed and protobuf, as cheap as any typed informer, but check the bytes of each object
// they decode: an object whose message is longer than its typed encoding has fields kubedeploy does not know, and
// is noted as unread at its generation. When a controller needs such an object's template (Resolve, Template,
// UnsupportedFields), the Store reads it once as JSON through the dynamic client and notes, per object UID and
// generation:
//
//   - the pod template as stored (a map[string]any), kept only when it has unknown fields; ReplicaSets and pods are
//     then created from it (ReplicaSetWithTemplate, PodWithTemplateSpec: objects the controllers send through their
//     Client seam, deployment.Client and replicaset.Client) and a rollback patches it back;
//   - a fingerprint of those unknown fields' values, folded into template equality (RV-1) and into the
//     pod-template-hash, both of which stay upstream's for every template without unknown fields;
//   - a Deployment's unknown fields outside the pod template (say a future spec.podReplacementPolicy): kubedeploy
//     does not know what they ask for, so it does not manage that Deployment.
//
// Objects without unknown fields, all of them on a cluster of kubedeploy's own version, cost one small entry, are
// never read as JSON and are created through the typed, protobuf clients as before. A nil *Store is valid: it
// knows of no unknown fields (unit tests that build typed objects use it).
//
// The Deployment controller, the ReplicaSet controller, observe mode's shadow check and `rollout plan`'s simulator
// all run the same syncs over a Store (the live controllers' and the shadow's filled by informers, the simulator's
// by Note), so the pod-template-hash, and with it the ReplicaSet names, are computed the same way in all of them.
// This package sends nothing but the JSON reads of Resolve; it must never import a test package.
package rawtemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// The resources whose pod templates are carried.
var (
	Deployments = appsv1.SchemeGroupVersion.WithResource("deployments")
	ReplicaSets = appsv1.SchemeGroupVersion.WithResource("replicasets")
)

var (
	deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")
	replicaSetKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// ErrStale is returned when the Store has seen another generation of an object than the one asked about: the
// informer's transform has run for a newer version that is not in the cache yet. The caller retries (the sync is
// requeued); copying the older typed template instead could drop fields.
var ErrStale = errors.New("the stored pod template of this generation is not known yet")

// templatePrefix is where a workload's pod template sits in the unknown-field paths that
// runtime.DefaultUnstructuredConverter reports ("spec.template.spec.containers[0].someField").
const templatePrefix = "spec.template."

// Store holds what is known of each Deployment and ReplicaSet's fields beyond kubedeploy's API, by UID. Its
// methods are safe for concurrent use; a nil *Store knows of no unknown fields.
type Store struct {
	// logger logs each Deployment generation with unknown spec fields outside its template, once.
	logger klog.Logger
	// client reads unread objects as JSON (Resolve).
	client  dynamic.Interface
	mu      sync.RWMutex
	entries map[types.UID]*entry
}

// entry is what is known of one object at one generation. For objects without unknown fields (the usual case) all
// but generation are zero.
type entry struct {
	generation int64
	// resource, namespace and name say where to read an unread object (Resolve) and name the object in
	// Unsupported; set for those only.
	resource        schema.GroupVersionResource
	namespace, name string
	// unread: the informer saw spec fields it could not decode; the rest of the entry is not known until Resolve
	// reads the object as JSON.
	unread bool
	// digest identifies the spec bytes that had unknown fields (specCheck), so that later events of the same spec
	// do not make the object unread again; 0 when the spec had none.
	digest uint64
	// template is the pod template as stored, when it has unknown fields.
	template map[string]any
	// fingerprint is "path=value" lines of the template's unknown fields, sorted; "" when there are none.
	fingerprint string
	// unsupported are a Deployment's unknown fields outside the pod template, paths from the object root.
	unsupported []string
}

// NewStore returns an empty Store that logs with logger and reads unread objects as JSON through client (nil: none
// can be read, and Resolve returns an error for them).
func NewStore(logger klog.Logger, client dynamic.Interface) *Store {
	return &Store{logger: logger, client: client, entries: map[types.UID]*entry{}}
}

// Note reads u, an apps/v1 Deployment or ReplicaSet as the API server sent it in JSON, notes what it holds beyond
// the typed object and returns the typed object (no apiVersion and kind, as a typed informer's; managedFields kept
// as sent). It errors when u is another kind or does not convert to its typed kind (a field of the wrong JSON
// type). Resolve and NoteReplicaSet use it, `rollout plan`'s simulator notes the objects it plans from with it
// (after Carry); tests feed it recorded responses.
func (s *Store) Note(u *unstructured.Unstructured) (runtime.Object, error) {
	typed, e, err := decode(u)
	if err != nil {
		return nil, err
	}
	s.put(typed.(metav1.Object).GetUID(), e)
	return typed, nil
}

// decode converts u to its typed kind and reads its unknown fields into an entry.
func decode(u *unstructured.Unstructured) (runtime.Object, *entry, error) {
	var typed runtime.Object
	var resource schema.GroupVersionResource
	switch gvk := u.GroupVersionKind(); gvk {
	case deploymentKind:
		typed, resource = &appsv1.Deployment{}, Deployments
	case replicaSetKind:
		typed, resource = &appsv1.ReplicaSet{}, ReplicaSets
	default:
		return nil, nil, fmt.Errorf("rawtemplate: unexpected kind %v of %s/%s", gvk, u.GetNamespace(), u.GetName())
	}
	unknown, err := UnknownFields(u.Object, typed)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	// A typed informer's objects carry no apiVersion and kind; keep the cache the same.
	typed.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	e := &entry{generation: u.GetGeneration(), resource: resource, namespace: u.GetNamespace(), name: u.GetName()}
	var templateFields []string
	for _, path := range unknown {
		switch {
		case strings.HasPrefix(path, templatePrefix):
			templateFields = append(templateFields, path)
		case strings.HasPrefix(path, "spec.") && u.GroupVersionKind() == deploymentKind:
			e.unsupported = append(e.unsupported, path)
		}
		// Unknown status fields are the controller's own, written by a newer one: there is none but us.
		// Unknown metadata fields do not occur (ObjectMeta is shared by every kind); a ReplicaSet's unknown
		// spec fields are kept by the patches that write it.
	}
	if len(templateFields) > 0 {
		template, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
		e.template = template
		e.fingerprint = fingerprint(u.Object, templateFields)
	}
	return typed, e, nil
}

// UnknownFields fills typed (a pointer to a typed API struct) from obj (runtime.DefaultUnstructuredConverter) and returns the paths of obj's fields
// that typed has no place for, sorted, from the object root ("spec.template.spec.containers[0].someField"), as
// apimachinery's converter reports them; nil when there are none. The error is the converter's (a field of the
// wrong JSON type).
func UnknownFields(obj map[string]any, typed any) ([]string, error) {
	err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, typed, true)
	if err == nil {
		return nil, nil
	}
	strict, ok := runtime.AsStrictDecodingError(err)
	if !ok {
		return nil, err
	}
	var paths []string
	for _, e := range strict.Errors() {
		msg := e.Error()
		path, ok := strings.CutPrefix(msg, `unknown field "`)
		if !ok || !strings.HasSuffix(path, `"`) {
			return nil, fmt.Errorf("unexpected strict decoding error %q", msg)
		}
		paths = append(paths, strings.TrimSuffix(path, `"`))
	}
	slices.Sort(paths)
	return paths, nil
}

// fingerprint returns "path=<JSON value>" lines for paths (relative to the pod template) read from obj. A path
// that cannot be followed (a map key with a dot in it) contributes the whole template instead, so unequal templates
// never share a fingerprint.
func fingerprint(obj map[string]any, paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		v, ok := Field(obj, p)
		if !ok {
			v, _, _ = unstructured.NestedFieldNoCopy(obj, "spec", "template")
			p = "spec.template"
		}
		raw, err := json.Marshal(v) // maps marshal with sorted keys
		if err != nil {
			raw = []byte(fmt.Sprintf("%#v", v))
		}
		b.WriteString(strings.TrimPrefix(p, templatePrefix))
		b.WriteByte('=')
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// Field returns the value at path ("a.b[2].c", as UnknownFields gives it) in obj, following maps and slices; false
// when the path does not lead to a value (or a map key on it has a dot).
func Field(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				return nil, false
			}
			i, err := strconv.Atoi(idx)
			list, isList := cur.([]any)
			if err != nil || !isList || i < 0 || i >= len(list) {
				return nil, false
			}
			cur, rest = list[i], strings.TrimPrefix(after, "[")
		}
	}
	return cur, true
}

// put notes e, read from the object as stored, unless a newer generation is noted already.
func (s *Store) put(uid types.UID, e *entry) {
	s.putOver(uid, e, nil)
}

// putOver is put that, when e's generation is the one noted, replaces only the entry was (nil: any): Resolve does
// not replace what an event noted while it read.
func (s *Store) putOver(uid types.UID, e, was *entry) {
	if s == nil || uid == "" {
		return
	}
	s.mu.Lock()
	old := s.entries[uid]
	if old != nil && (old.generation > e.generation || was != nil && old != was && old.generation == e.generation) {
		s.mu.Unlock()
		return
	}
	s.entries[uid] = e
	s.mu.Unlock()
	if len(e.unsupported) > 0 && (old == nil || old.generation != e.generation || old.unread) {
		// Once per generation, by construction: resyncs and status updates keep the generation.
		s.logger.Info("Deployment has spec fields outside its pod template that kubedeploy's API does not know; kubedeploy's "+
			"Deployment controller does not manage it until they are removed or kubedeploy is built against the cluster's Kubernetes version",
			"deployment", klog.KRef(e.namespace, e.name), "generation", e.generation, "fields", e.unsupported,
			"compiledVersion", buildinfo.KubernetesVersion())
	}
}

// observe notes obj, just decoded by an informer of resource, with what check found in its spec's bytes. A spec
// without unknown fields needs nothing more. One with unknown fields makes the object unread, unless the entry is
// of the same generation and spec bytes already (a status update, a resync): what is known of it stays. An older
// generation (an event still in flight after Resolve read a newer one) never replaces a newer one.
func (s *Store) observe(resource schema.GroupVersionResource, obj metav1.Object, c specCheck) {
	uid, generation := obj.GetUID(), obj.GetGeneration()
	if s == nil || uid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.entries[uid]
	if old != nil && (old.generation > generation || old.generation == generation && c.unknown && old.digest == c.digest) {
		return
	}
	if old != nil && old.generation == generation && !c.unknown && old.digest == 0 && !old.unread {
		return // the usual case: nothing unknown, as before
	}
	e := &entry{generation: generation}
	if c.unknown {
		e.resource, e.namespace, e.name, e.unread, e.digest = resource, obj.GetNamespace(), obj.GetName(), true, c.digest
	}
	s.entries[uid] = e
}

// Forget drops what is noted of a deleted object (or a cache.DeletedFinalStateUnknown holding one). NewInformer
// calls it on every delete.
func (s *Store) Forget(obj any) {
	if s == nil {
		return
	}
	m, ok := runner.ObjectFrom[metav1.Object](s.logger, obj)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, m.GetUID())
}

// entryFor returns obj's entry at obj's generation: nil when nothing is noted of obj (an object that did not come
// through an informer or Note has no unknown fields), ErrStale when another generation is.
func (s *Store) entryFor(obj metav1.Object) (*entry, error) {
	if s == nil {
		return nil, nil
	}
	s.mu.RLock()
	e := s.entries[obj.GetUID()]
	s.mu.RUnlock()
	if e == nil {
		return nil, nil
	}
	if e.generation != obj.GetGeneration() {
		return nil, fmt.Errorf("%s/%s generation %d (noted: %d): %w", obj.GetNamespace(), obj.GetName(), obj.GetGeneration(), e.generation, ErrStale)
	}
	return e, nil
}

// Resolve reads, as JSON through the Store's dynamic client, each of objs (Deployments and ReplicaSets from the
// informers' caches) that is noted as unread at its generation, and notes what it holds; objects noted otherwise
// cost nothing. Call it before Fingerprint on objects an informer decoded. It returns the first error: the API
// server's (NotFound for an object deleted since), ErrStale (wrapped) when the object read is another generation
// or another object of that name (the informer has not caught up; retry), or an error when the Store has no client.
func (s *Store) Resolve(ctx context.Context, objs ...metav1.Object) error {
	for _, obj := range objs {
		e, err := s.entryFor(obj)
		if err != nil || e == nil || !e.unread {
			continue // a stale entry is reported by whoever asks for the template
		}
		if s.client == nil {
			return fmt.Errorf("%s %s/%s has fields kubedeploy's API does not know and the store has no client to read them", e.resource.Resource, e.namespace, e.name)
		}
		u, err := s.client.Resource(e.resource).Namespace(e.namespace).Get(ctx, e.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s %s/%s as stored: %w", e.resource.Resource, e.namespace, e.name, err)
		}
		if u.GetUID() != obj.GetUID() {
			return fmt.Errorf("%s %s/%s was replaced (uid %s, was %s): %w", e.resource.Resource, e.namespace, e.name, u.GetUID(), obj.GetUID(), ErrStale)
		}
		typed, read, err := decode(u)
		if err != nil {
			return err
		}
		if read.generation == e.generation {
			read.digest = e.digest // the spec read is the one the informer saw, or newer: a newer one's event reads again
		}
		s.putOver(typed.(metav1.Object).GetUID(), read, e)
		if u.GetGeneration() != obj.GetGeneration() {
			return fmt.Errorf("%s %s/%s generation %d (read: %d): %w", e.resource.Resource, e.namespace, e.name, obj.GetGeneration(), u.GetGeneration(), ErrStale)
		}
	}
	return nil
}

// Template returns obj's pod template as the API server stored it (a deep copy the caller may change) when it has
// fields kubedeploy's API does not know, else nil; it resolves obj first (Resolve, whose errors it returns). The
// error is ErrStale (wrapped) when the object in hand is not the generation last seen.
func (s *Store) Template(ctx context.Context, obj metav1.Object) (map[string]any, error) {
	if err := s.Resolve(ctx, obj); err != nil {
		return nil, err
	}
	e, err := s.entryFor(obj)
	if e == nil || e.template == nil {
		return nil, err
	}
	return runtime.DeepCopyJSON(e.template), nil
}

// Fingerprint returns the values of obj's unknown pod-template fields as "path=<JSON>" lines, "" when there are
// none or the generation is not the one noted (Template and the writes report that case). Two templates that are
// equal as typed objects are equal as stored exactly when their fingerprints are. obj must be resolved (Resolve):
// for an object still unread it returns a value equal to no other object's, so that no template is taken for
// another on a guess.
func (s *Store) Fingerprint(obj metav1.Object) string {
	e, _ := s.entryFor(obj)
	switch {
	case e == nil:
		return ""
	case e.unread:
		return fmt.Sprintf("unread %s generation %d\n", obj.GetUID(), e.generation)
	}
	return e.fingerprint
}

// NewReplicaSet returns d's new ReplicaSet among rss as the Deployment controller finds it (RV-1): the oldest
// whose typed pod template equals d's ignoring pod-template-hash (rolloutstate.NewReplicaSet) and whose unknown
// template fields have d's values (Fingerprint; d and rss resolved); nil when none is. A nil Store compares typed
// templates alone. rss is not modified. Observe mode's shadow check and `rollout plan`'s simulator judge with it
// what the controller's syncs judge with its own copy of the rule.
func (s *Store) NewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	fp := s.Fingerprint(d)
	return rolloutstate.NewReplicaSet(d, slices.DeleteFunc(slices.Clone(rss), func(rs *appsv1.ReplicaSet) bool {
		return s.Fingerprint(rs) != fp
	}))
}

// UnsupportedFields returns the paths ("spec.podReplacementPolicy") of d's fields outside the pod template that
// kubedeploy's API does not know, sorted; nil when there are none. It resolves d first (Resolve, whose errors it
// returns). The error is ErrStale (wrapped) when d is not the generation last seen: its fields are not known then.
func (s *Store) UnsupportedFields(ctx context.Context, d metav1.Object) ([]string, error) {
	if err := s.Resolve(ctx, d); err != nil {
		return nil, err
	}
	e, err := s.entryFor(d)
	if e == nil {
		return nil, err
	}
	return slices.Clone(e.unsupported), nil
}

// Unsupported is one Deployment kubedeploy refuses to manage, and why.
type Unsupported struct {
	Namespace, Name string
	// Fields are the unknown fields' paths from the object root, sorted.
	Fields []string
}

// Unsupported lists every Deployment with unknown fields outside its pod template, as last seen.
func (s *Store) Unsupported() []Unsupported {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Unsupported
	for _, e := range s.entries {
		if len(e.unsupported) > 0 {
			out = append(out, Unsupported{Namespace: e.namespace, Name: e.name, Fields: slices.Clone(e.unsupported)})
		}
	}
	return out
}
