// Package dryrun is the controllers' client for runs whose writes must not reach a cluster: `rollout plan`'s
// simulator and observe mode's shadow check. Its Client implements deployment.Client and replicaset.Client:
// reads go to a Reader it is given, writes are recorded (Write) and answered as the API server would answer a
// successful write, the object the write leaves computed here (patches applied to the object Current gives).
// An OnWrite hook lets the caller apply each write to a world of its own (the simulator's cluster).
//
// It owns no store and sends nothing: a Reader has no write method, so a write cannot leave the process by
// construction. It must never import a test package (fake clientsets, client-go's testing package): the
// kubedeploy-controllers binary links it through the shadow check.
//
// A create sent as JSON with a pod template as stored (IM-8) is recorded typed, with the JSON beside it
// (Write.Sent), and answered as a server that keeps unknown fields answers: the object OnWrite left, with the
// sent fields kubedeploy's API does not know (rawtemplate.Carry), so the controllers note the created ReplicaSet's
// template and fingerprint as they do on a cluster.
package dryrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The resources a Write names.
const (
	Deployments = "deployments"
	ReplicaSets = "replicasets"
	Pods        = "pods"
)

// The verbs a Write names.
const (
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
)

// Reader answers the controllers' reads that bypass the informer caches. apiclient.Client is one (the shadow
// check's, over a read-only clientset).
type Reader interface {
	GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	ListReplicaSets(ctx context.Context, namespace string) (*appsv1.ReplicaSetList, error)
	ListPods(ctx context.Context, namespace string, selector labels.Selector) (*v1.PodList, error)
}

// Write is one write a controller made through a Client.
type Write struct {
	// Verb is VerbCreate, VerbUpdate, VerbPatch or VerbDelete.
	Verb string
	// Resource is Deployments, ReplicaSets or Pods; Subresource "status" or "".
	Resource, Subresource string
	// Namespace and Name name the object written; a create by generateName that OnWrite does not name is
	// recorded under the generateName followed by "*".
	Namespace, Name string
	// Object is the object the write leaves (*appsv1.Deployment, *appsv1.ReplicaSet or *v1.Pod): the created
	// or updated one as sent, the patched one; nil for a delete. OnWrite may change it (fields the API server
	// sets); the Client answers with a copy of it as OnWrite left it.
	Object runtime.Object
	// Sent is, for a create sent as JSON (CreateReplicaSetUnstructured, CreatePodUnstructured: a pod template
	// as stored, IM-8), the object as sent, fields kubedeploy's API does not know included; Object is its typed
	// form, without them. Nil for every other write.
	Sent map[string]any
}

// Config is what New needs.
type Config struct {
	// Reader answers the reads. Required.
	Reader Reader
	// Current returns the object a write applies to (resource is Deployments, ReplicaSets or Pods), ok false
	// when there is none: a patch applies to it; an update, a patch or a delete of an object it does not
	// know is answered NotFound, a create of one it knows AlreadyExists. Required.
	Current func(resource, namespace, name string) (obj runtime.Object, ok bool)
	// OnWrite, if set, is called with each write before it is recorded and answered, one at a time: it may
	// apply it to the caller's world and change w.Object. An error fails the write (nothing is recorded)
	// and is what the controller gets.
	OnWrite func(w *Write) error
}

// Client records the writes made through it and answers them; reads go to Config.Reader. It is safe for
// concurrent use (the ReplicaSet controller creates and deletes pods in parallel). Build it with New.
type Client struct {
	cfg    Config
	mu     sync.Mutex
	writes []Write
}

// New returns a Client over cfg. It panics when cfg.Reader or cfg.Current is nil (a programming error).
func New(cfg Config) *Client {
	if cfg.Reader == nil || cfg.Current == nil {
		panic("dryrun: New needs a Reader and Current")
	}
	return &Client{cfg: cfg}
}

// Writes returns the writes recorded so far, in order.
func (c *Client) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Write(nil), c.writes...)
}

// Take returns the writes recorded since the last Take, in order, and forgets them.
func (c *Client) Take() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.writes
	c.writes = nil
	return out
}

// write computes, hooks and records w, whose Object is the object as sent (create, update) or nil (patch,
// delete; patch applies patch of type pt to the current object). It returns a copy of the object the write
// left, or an API error: NotFound, AlreadyExists, a 422 Invalid for a patch that does not apply (as
// kube-apiserver answers a failed JSON patch test), BadRequest for a patch that does not decode.
func (c *Client) write(w Write, pt types.PatchType, patch []byte) (runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, exists := c.cfg.Current(w.Resource, w.Namespace, w.Name)
	switch {
	case w.Verb == VerbCreate && exists && w.Name != "":
		return nil, apierrors.NewAlreadyExists(groupResource(w.Resource), w.Name)
	case w.Verb != VerbCreate && !exists:
		return nil, apierrors.NewNotFound(groupResource(w.Resource), w.Name)
	case w.Verb == VerbPatch:
		patched, err := applyPatch(cur, pt, patch)
		if err != nil {
			return nil, err
		}
		w.Object = patched
	}
	if c.cfg.OnWrite != nil {
		if err := c.cfg.OnWrite(&w); err != nil {
			return nil, err
		}
	}
	if w.Object == nil {
		c.writes = append(c.writes, w)
		return nil, nil
	}
	if w.Verb == VerbCreate && w.Name == "" {
		if m, ok := w.Object.(interface{ GetName() string }); ok {
			w.Name = m.GetName()
		}
	}
	if w.Verb == VerbCreate && w.Name == "" {
		w.Name = w.Object.(interface{ GetGenerateName() string }).GetGenerateName() + "*"
	}
	answer := w.Object.DeepCopyObject()
	w.Object = w.Object.DeepCopyObject()
	c.writes = append(c.writes, w)
	return answer, nil
}

// applyPatch returns a new object: cur with patch, of type pt, applied as the API server applies a JSON patch
// (test operations included), a merge patch or a strategic merge patch (to cur's Go type).
func applyPatch(cur runtime.Object, pt types.PatchType, patch []byte) (runtime.Object, error) {
	orig, err := json.Marshal(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var modified []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("dryrun: decoding a JSON patch: %v", err))
		}
		modified, err = p.Apply(orig)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		modified, err = jsonpatch.MergePatch(orig, patch)
	case types.StrategicMergePatchType:
		modified, err = strategicpatch.StrategicMergePatch(orig, patch, cur)
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("dryrun: unsupported patch type %q", pt))
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("dryrun: applying a %s patch: %v", pt, err))
	}
	out := reflect.New(reflect.TypeOf(cur).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(modified, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("dryrun: the patched object does not decode: %v", err))
	}
	return out, nil
}

// groupResource is resource's group and name, for API errors.
func groupResource(resource string) schema.GroupResource {
	if resource == Pods {
		return v1.Resource(resource)
	}
	return appsv1.Resource(resource)
}
