package shadow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// ErrNoRecording is what a mutating request gets when its context carries no recording (withRecording): the
// transport never sends a write, whether or not one is being recorded.
var ErrNoRecording = errors.New("shadow: a write outside a recorded sync was refused (the shadow check never writes)")

// write is one mutating request a shadow sync made, as the transport answered it.
type write struct {
	// verb is create, update, patch or delete.
	verb string
	// resource is the request's resource (deployments, replicasets, pods) and subresource the subresource
	// ("status" or "").
	resource, subresource string
	namespace, name       string
	// object is the object the write would have left (the created or updated object, the patched one); nil
	// for a delete.
	object []byte
}

// recording collects a sync's writes; one per check.
type recording struct {
	mu     sync.Mutex
	writes []write
	// current returns the object a patch applies to, as JSON, and its Go type for a strategic merge patch;
	// ok false when the object is not known.
	current func(resource, namespace, name string) (obj []byte, dataStruct any, ok bool)
}

func (r *recording) add(w write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
}

func (r *recording) taken() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]write(nil), r.writes...)
}

type recordingKey struct{}

// withRecording returns ctx whose requests through a recordingTransport record their writes in r.
func withRecording(ctx context.Context, r *recording) context.Context {
	return context.WithValue(ctx, recordingKey{}, r)
}

// recordingTransport is the shadow syncs' HTTP transport: reads (GET, HEAD) go to next, the API server, with
// the observer's read-only credentials; every other request is answered here, never sent: it is recorded in
// the request context's recording and answered as the API server would answer a successful write (the
// object created, updated or patched; a Success status for a delete), so that the sync goes on as it would.
// Requests are JSON (Checker sets the client's content type).
type recordingTransport struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		if t.next == nil {
			return nil, fmt.Errorf("shadow: no API server to read %s from", req.URL.Path)
		}
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		defer req.Body.Close()
	}
	rec, _ := req.Context().Value(recordingKey{}).(*recording)
	if rec == nil {
		return nil, ErrNoRecording
	}
	p, err := parsePath(req.URL.Path)
	if err != nil {
		return nil, err
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, fmt.Errorf("shadow: reading a %s request's body: %w", req.Method, err)
		}
	}
	w := write{resource: p.resource, subresource: p.subresource, namespace: p.namespace, name: p.name}
	status := http.StatusOK
	switch req.Method {
	case http.MethodPost:
		w.verb, w.object, status = "create", body, http.StatusCreated
		w.name = nameOf(body)
	case http.MethodPut:
		w.verb, w.object = "update", body
	case http.MethodPatch:
		w.verb = "patch"
		if w.object, err = applyPatch(rec, p, types.PatchType(req.Header.Get("Content-Type")), body); err != nil {
			return nil, err
		}
	case http.MethodDelete:
		w.verb = "delete"
	default:
		return nil, fmt.Errorf("shadow: unexpected %s request for %s", req.Method, req.URL.Path)
	}
	rec.add(w)
	answer := w.object
	if answer == nil {
		answer = []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}`)
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(answer)), ContentLength: int64(len(answer)), Request: req,
	}, nil
}

// nameOf returns a JSON object's metadata.name, or its generateName followed by "*" (a pod the ReplicaSet
// controller creates), or "".
func nameOf(obj []byte) string {
	var m struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if json.Unmarshal(obj, &m) != nil {
		return ""
	}
	if m.Metadata.Name == "" && m.Metadata.GenerateName != "" {
		return m.Metadata.GenerateName + "*"
	}
	return m.Metadata.Name
}

// applyPatch returns the object a patch leaves: the current object (rec.current) with body applied, as the
// API server would apply a JSON patch (test operations included), a merge patch or a strategic merge patch.
func applyPatch(rec *recording, p requestPath, pt types.PatchType, body []byte) ([]byte, error) {
	cur, dataStruct, ok := rec.current(p.resource, p.namespace, p.name)
	if !ok {
		return nil, fmt.Errorf("shadow: a patch of %s %s/%s, which the caches do not hold", p.resource, p.namespace, p.name)
	}
	switch pt {
	case types.JSONPatchType:
		patch, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, fmt.Errorf("shadow: decoding a JSON patch: %w", err)
		}
		return patch.Apply(cur)
	case types.MergePatchType:
		return jsonpatch.MergePatch(cur, body)
	case types.StrategicMergePatchType:
		return strategicpatch.StrategicMergePatch(cur, body, dataStruct)
	}
	return nil, fmt.Errorf("shadow: unsupported patch type %q", pt)
}

// requestPath is a namespaced resource request's path, split.
type requestPath struct {
	resource, subresource, namespace, name string
}

// parsePath splits /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]] and /apis/GROUP/VERSION/namespaces/... . It
// returns an error for any other path: the controllers write only namespaced objects.
func parsePath(path string) (requestPath, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return requestPath{}, fmt.Errorf("shadow: unexpected write path %s", path)
	}
	if len(parts) < 3 || parts[0] != "namespaces" {
		return requestPath{}, fmt.Errorf("shadow: unexpected write path %s", path)
	}
	p := requestPath{namespace: parts[1], resource: parts[2]}
	if len(parts) > 3 {
		p.name = parts[3]
	}
	if len(parts) > 4 {
		p.subresource = parts[4]
	}
	return p, nil
}

// dataStructFor is the Go type a strategic merge patch of resource follows.
func dataStructFor(resource string) any {
	switch resource {
	case "deployments":
		return &appsv1.Deployment{}
	case "replicasets":
		return &appsv1.ReplicaSet{}
	default:
		return &v1.Pod{}
	}
}
