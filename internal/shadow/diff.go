package shadow

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Kind is what a divergence would change, the "kind" label of kubedeploy_shadow_divergences_total.
type Kind string

// The kinds of divergence.
const (
	// KindScale: a ReplicaSet's (or Deployment's) spec.replicas.
	KindScale Kind = "scale"
	// KindCreateReplicaSet and KindDeleteReplicaSet: a ReplicaSet made (a new template) or deleted (revision
	// history, RV-4).
	KindCreateReplicaSet Kind = "create_replicaset"
	KindDeleteReplicaSet Kind = "delete_replicaset"
	// KindCreatePod and KindDeletePod: pods a ReplicaSet sync would create or delete.
	KindCreatePod Kind = "create_pod"
	KindDeletePod Kind = "delete_pod"
	// KindCondition: a field of a status condition (Progressing, Available, ReplicaFailure).
	KindCondition Kind = "condition"
	// KindStatus: any other status field (replicas, observedGeneration, collisionCount, ...).
	KindStatus Kind = "status"
	// KindAnnotation: an annotation (revision, desired-replicas, max-replicas, kubedeploy.io/*).
	KindAnnotation Kind = "annotation"
	// KindOwnership: ownerReferences (adoption, release).
	KindOwnership Kind = "ownership"
	// KindSpec: any other spec field (a rollback's template, a Deployment's spec written by EX-2).
	KindSpec Kind = "spec"
	// KindMetadata: any other metadata field (labels).
	KindMetadata Kind = "metadata"
)

// Kinds lists every Kind, in a stable order (the metric's label values).
var Kinds = []Kind{KindScale, KindCreateReplicaSet, KindDeleteReplicaSet, KindCreatePod, KindDeletePod,
	KindCondition, KindStatus, KindAnnotation, KindOwnership, KindSpec, KindMetadata}

// Divergence is one write kubedeploy's controllers would make where the live controller, at a settled state,
// makes none: Object is "Kind namespace/name" ("Pod ns/web-5d8f-*" for pods the ReplicaSet controller would
// create, named by generateName), Field the field's path ("spec.replicas",
// "status.conditions[Progressing].reason", "metadata.annotations[deployment.kubernetes.io/revision]"; empty
// for a create or a delete), Live and Kubedeploy the field's JSON value on the cluster and as kubedeploy
// would write it ("<none>": absent). Count is how many identical writes were merged (pods created or deleted).
type Divergence struct {
	Kind       Kind
	Object     string
	Field      string
	Live       string
	Kubedeploy string
	Count      int
}

// where is what a divergence changes, without the values: times that a sync sets to its now (a condition's
// lastUpdateTime) differ from one check to the next, the field they are in does not.
type where struct {
	Kind          Kind
	Object, Field string
}

func (d Divergence) where() where { return where{d.Kind, d.Object, d.Field} }

// sameFields reports whether a and b change the same fields of the same objects.
func sameFields(a, b []Divergence) bool {
	return slices.EqualFunc(a, b, func(x, y Divergence) bool { return x.where() == y.where() })
}

// String is the divergence on one line, as logs and `observe --once` show it.
func (d Divergence) String() string {
	if d.Field == "" {
		if d.Count > 1 {
			return fmt.Sprintf("%s: %s: %s ×%d", d.Kind, d.Object, d.Kubedeploy, d.Count)
		}
		return fmt.Sprintf("%s: %s: %s", d.Kind, d.Object, d.Kubedeploy)
	}
	return fmt.Sprintf("%s: %s %s: live %s, kubedeploy %s", d.Kind, d.Object, d.Field, d.Live, d.Kubedeploy)
}

// none is how an absent value reads.
const none = "<none>"

// objectKinds names the written resources' kinds.
var objectKinds = map[string]string{"deployments": "Deployment", "replicasets": "ReplicaSet", "pods": "Pod"}

// divergencesOf returns the divergences w makes: one per changed field for an update or a patch (against
// live, the object as the sync read it, JSON; nil when unknown), one for a create or a delete. Identical
// divergences are merged (Count). It returns an error when an object does not decode.
func divergencesOf(writes []write, live func(w write) []byte) ([]Divergence, error) {
	var out []Divergence
	for _, w := range writes {
		ds, err := divergencesOfWrite(w, live(w))
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return merge(out), nil
}

func divergencesOfWrite(w write, live []byte) ([]Divergence, error) {
	object := objectKinds[w.resource] + " " + w.namespace + "/" + w.name
	switch w.verb {
	case "create":
		kind := map[string]Kind{"replicasets": KindCreateReplicaSet, "pods": KindCreatePod}[w.resource]
		if kind == "" {
			kind = KindMetadata
		}
		what := "created"
		if w.resource == "replicasets" {
			what = "created with spec.replicas " + leafOf(w.object, "spec", "replicas")
		}
		return []Divergence{{Kind: kind, Object: object, Live: none, Kubedeploy: what, Count: 1}}, nil
	case "delete":
		kind := map[string]Kind{"replicasets": KindDeleteReplicaSet, "pods": KindDeletePod}[w.resource]
		if kind == "" {
			kind = KindMetadata
		}
		return []Divergence{{Kind: kind, Object: object, Live: "exists", Kubedeploy: "deleted", Count: 1}}, nil
	}
	if live == nil {
		return []Divergence{{Kind: KindMetadata, Object: object, Live: none, Kubedeploy: w.verb + " of an object not in the caches", Count: 1}}, nil
	}
	before, err := flatten(live, w.subresource)
	if err != nil {
		return nil, fmt.Errorf("shadow: %s as read: %w", object, err)
	}
	after, err := flatten(w.object, w.subresource)
	if err != nil {
		return nil, fmt.Errorf("shadow: %s as kubedeploy would write it: %w", object, err)
	}
	var out []Divergence
	for _, field := range slices.Sorted(maps.Keys(union(before, after))) {
		b, ok1 := before[field]
		a, ok2 := after[field]
		if ok1 && ok2 && a == b {
			continue
		}
		if !ok1 {
			b = none
		}
		if !ok2 {
			a = none
		}
		out = append(out, Divergence{Kind: kindOf(field), Object: object, Field: field, Live: b, Kubedeploy: a, Count: 1})
	}
	return out, nil
}

func union(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// kindOf classifies a flattened field path.
func kindOf(field string) Kind {
	switch {
	case field == "spec.replicas":
		return KindScale
	case strings.HasPrefix(field, "status.conditions"):
		return KindCondition
	case strings.HasPrefix(field, "status."):
		return KindStatus
	case strings.HasPrefix(field, "metadata.annotations"):
		return KindAnnotation
	case strings.HasPrefix(field, "metadata.ownerReferences"):
		return KindOwnership
	case strings.HasPrefix(field, "spec."):
		return KindSpec
	}
	return KindMetadata
}

// ignoredMetadata are the fields the API server sets, which a write does not decide.
var ignoredMetadata = []string{"resourceVersion", "managedFields", "generation", "creationTimestamp", "uid", "selfLink"}

// flatten returns obj's leaves as path → JSON value: of status alone for a write of the status
// subresource, else of metadata (less ignoredMetadata) and spec (the API server ignores status there).
// Conditions are keyed by type (status.conditions[Progressing].reason), map keys in brackets.
func flatten(obj []byte, subresource string) (map[string]string, error) {
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if subresource == "status" {
		walk("status", m["status"], out)
		return out, nil
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		for _, k := range ignoredMetadata {
			delete(meta, k)
		}
		walk("metadata", meta, out)
	}
	walk("spec", m["spec"], out)
	return out, nil
}

func walk(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case nil:
	case map[string]any:
		for k, e := range v {
			if path == "metadata.annotations" || path == "metadata.labels" || strings.HasSuffix(path, ".labels") || strings.HasSuffix(path, ".matchLabels") {
				walk(path+"["+k+"]", e, out)
			} else {
				walk(path+"."+k, e, out)
			}
		}
	case []any:
		if path == "status.conditions" {
			for _, e := range v {
				c, _ := e.(map[string]any)
				t, _ := c["type"].(string)
				walk(path+"["+t+"]", c, out)
			}
			return
		}
		for i, e := range v {
			walk(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		b, _ := json.Marshal(v)
		out[path] = string(b)
	}
}

// leafOf returns the JSON value at path in obj, or none.
func leafOf(obj []byte, path ...string) string {
	var v any
	if json.Unmarshal(obj, &v) != nil {
		return none
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return none
		}
		v = m[p]
	}
	if v == nil {
		return none
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// merge merges identical divergences (pods created or deleted by one sync), adding their counts, and sorts
// them by object, then field.
func merge(ds []Divergence) []Divergence {
	byKey := map[Divergence]int{}
	var out []Divergence
	for _, d := range ds {
		k := d
		k.Count = 0
		if i, ok := byKey[k]; ok {
			out[i].Count += d.Count
			continue
		}
		byKey[k] = len(out)
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Object != out[j].Object {
			return out[i].Object < out[j].Object
		}
		return out[i].Field < out[j].Field
	})
	return out
}
