package skew

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/testing/futurewire"
)

// futureVersion is the version futureServer reports: one minor newer than any kubedeploy built against v1.36.
var futureVersion = version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.0-future"}

// futureServer is kube-apiserver as kubedeploy sees a newer Kubernetes release: a reverse proxy in front of the
// embedded kube-apiserver (kubedeploy's own version, which drops fields it does not know) that keeps, per
// Deployment, ReplicaSet and pod, the fields unknown to kubedeploy's compiled API that a client sent, and puts them
// back into every JSON object it serves (gets, lists, watch events, write responses), as a newer server storing
// them would. Like a real server it forgets them when a write replaces them: a PUT of the object (protobuf, from a
// typed client, carries none), or a JSON patch of /spec/template. In protobuf responses and watch events, a
// Deployment or ReplicaSet with noted spec fields gets a field in its spec message that kubedeploy's generated code
// has no number for (futurewire): the bytes a newer server sends, which kubedeploy's informers must notice. It also
// answers /version with futureVersion.
type futureServer struct {
	*httptest.Server
	proxy *httputil.ReverseProxy
	// logf logs each write of a Deployment other than its status (t.Logf).
	logf func(format string, args ...any)

	mu sync.Mutex
	// fields are each object's unknown fields: path from the object root (rawtemplate.UnknownFields) to value.
	fields map[objectKey]map[string]any
	// informerReads counts the reads of Deployments and ReplicaSets by kubedeploy's shared informers (user agent
	// "…shared-informers…") by how they were asked: "protobuf list", "json get", ….
	informerReads map[string]int
}

// objectKey names one object of a tracked resource.
type objectKey struct{ resource, namespace, name string }

// typedFor returns an empty object of resource's kubedeploy-compiled type, or nil for an untracked resource.
func typedFor(resource string) runtime.Object {
	switch resource {
	case "deployments":
		return &appsv1.Deployment{}
	case "replicasets":
		return &appsv1.ReplicaSet{}
	case "pods":
		return &v1.Pod{}
	}
	return nil
}

// newFutureServer starts a futureServer in front of env's API server until t ends, and returns it.
func newFutureServer(t *testing.T) *futureServer {
	t.Helper()
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	s := &futureServer{fields: map[objectKey]map[string]any{}, informerReads: map[string]int{}, logf: t.Logf}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// Our transport asks for gzip itself and decompresses, so responses can be read and rewritten.
			r.Out.Header.Del("Accept-Encoding")
		},
		Transport:      transport,
		FlushInterval:  -1, // watch events as they come
		ModifyResponse: s.modifyResponse,
	}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// restConfig is a client configuration that talks to s (plain HTTP on 127.0.0.1; s adds the admin credentials).
func (s *futureServer) restConfig() *rest.Config {
	return &rest.Config{Host: s.URL, QPS: 100, Burst: 200}
}

// request is what ServeHTTP learned of a request, for modifyResponse.
type request struct {
	resource, namespace, name, subresource string
	// created are the unknown fields of a JSON create's body, recorded under the name the server gives.
	created map[string]any
}

type requestKey struct{}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and the same under /apis/apps/v1.
func parsePath(p string) (req request, ok bool) {
	rest, found := strings.CutPrefix(p, "/apis/apps/v1/")
	if !found {
		if rest, found = strings.CutPrefix(p, "/api/v1/"); !found {
			return req, false
		}
	}
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	if len(segs) >= 3 && segs[0] == "namespaces" {
		req.namespace, segs = segs[1], segs[2:]
	}
	req.resource = segs[0]
	if len(segs) > 1 {
		req.name = segs[1]
	}
	if len(segs) > 2 {
		req.subresource = segs[2]
	}
	return req, typedFor(req.resource) != nil
}

func isJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json"
}

func isProtobuf(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == runtime.ContentTypeProtobuf
}

// ServeHTTP answers /version, records what a write does to a tracked object's unknown fields and proxies.
func (s *futureServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/version" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(futureVersion)
		return
	}
	req, tracked := parsePath(r.URL.Path)
	if tracked && r.Method == http.MethodGet && req.resource != "pods" && strings.Contains(r.UserAgent(), "shared-informers") {
		s.countRead(r, req)
	}
	if !tracked || r.Method == http.MethodGet {
		s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := objectKey{req.resource, req.namespace, req.name}
	ct := r.Header.Get("Content-Type")
	switch {
	case r.Method == http.MethodPost && req.name == "" && isJSON(ct):
		req.created = unknownOf(body, typedFor(req.resource), "")
		// Noted before the server answers: its watch event may reach an informer before the response does.
		var named struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if json.Unmarshal(body, &named) == nil && named.Metadata.Name != "" {
			s.set(objectKey{req.resource, req.namespace, named.Metadata.Name}, req.created, "")
		}
	case r.Method == http.MethodPut && req.subresource == "":
		s.set(key, unknownOf(body, typedFor(req.resource), ""), "") // protobuf: none survive, as on a newer server
	case r.Method == http.MethodPatch && req.subresource == "" && strings.HasPrefix(ct, "application/json-patch+json"):
		var ops []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		_ = json.Unmarshal(body, &ops)
		for _, op := range ops {
			if (op.Op == "add" || op.Op == "replace") && op.Path == "/spec/template" {
				s.set(key, unknownOf(op.Value, &v1.PodTemplateSpec{}, "spec.template."), "spec.template.")
			}
		}
	case r.Method == http.MethodDelete:
		s.set(key, nil, "")
	}
	if req.resource == "deployments" && req.subresource == "" {
		s.logf("%s %s (%s): unknown fields now %v", r.Method, r.URL.Path, ct, s.unknown(req.resource, req.namespace, req.name))
	}
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
}

// countRead counts a read of the shared informers in informerReads.
func (s *futureServer) countRead(r *http.Request, req request) {
	encoding := "json"
	if strings.HasPrefix(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
		encoding = "protobuf"
	}
	verb := "list"
	switch {
	case req.name != "":
		verb = "get"
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		verb = "watch"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.informerReads[encoding+" "+verb]++
}

// reads returns a copy of informerReads.
func (s *futureServer) reads() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.informerReads)
}

// unknownOf returns the fields of the JSON object body that typed does not know, by path with prefix; nil for a
// body that is not a JSON object.
func unknownOf(body []byte, typed any, prefix string) map[string]any {
	obj := map[string]any{}
	// Integers as int64, as the converter (and client-go's unstructured decoding) wants them.
	if err := utiljson.Unmarshal(body, &obj); err != nil {
		return nil
	}
	paths, err := rawtemplate.UnknownFields(obj, typed)
	if err != nil {
		return nil
	}
	out := map[string]any{}
	for _, p := range paths {
		if v, ok := rawtemplate.Field(obj, p); ok {
			out[prefix+p] = v
		}
	}
	return out
}

// set replaces key's unknown fields under prefix ("" for all) with fields.
func (s *futureServer) set(key objectKey, fields map[string]any, prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := map[string]any{}
	for p, v := range s.fields[key] {
		if !strings.HasPrefix(p, prefix) {
			kept[p] = v
		}
	}
	for p, v := range fields {
		kept[p] = v
	}
	s.fields[key] = kept
}

// unknown returns a copy of the unknown fields noted for key.
func (s *futureServer) unknown(resource, namespace, name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]any{}
	for p, v := range s.fields[objectKey{resource, namespace, name}] {
		out[p] = v
	}
	return out
}

// inject sets obj's noted unknown fields into it (a tracked resource's object).
func (s *futureServer) inject(resource string, obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	for p, v := range s.unknown(resource, ns, name) {
		parent, last := map[string]any(obj), p
		if i := strings.LastIndex(p, "."); i >= 0 {
			v, ok := rawtemplate.Field(obj, p[:i])
			if parent, ok = v.(map[string]any); !ok {
				continue
			}
			last = p[i+1:]
		}
		parent[last] = runtime.DeepCopyJSONValue(v)
	}
}

// modifyResponse notes a JSON create's unknown fields under the created name and puts the noted fields into every
// JSON object of a tracked resource that the response carries.
func (s *futureServer) modifyResponse(resp *http.Response) error {
	req, _ := resp.Request.Context().Value(requestKey{}).(request)
	if typedFor(req.resource) == nil || resp.StatusCode >= 300 {
		return nil
	}
	q := resp.Request.URL.Query().Get("watch")
	watching := q == "true" || q == "1"
	if isProtobuf(resp.Header.Get("Content-Type")) && req.resource != "pods" {
		return s.modifyProtobuf(resp, req.resource, watching)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return nil
	}
	if watching {
		setStream(resp, s.rewriteWatch(req.resource, resp.Body))
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	obj := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return err
	}
	if req.created != nil {
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		s.set(objectKey{req.resource, req.namespace, name}, req.created, "")
	}
	if items, ok := obj["items"].([]any); ok {
		for _, item := range items {
			if m, ok := item.(map[string]any); ok {
				s.inject(req.resource, m)
			}
		}
	} else {
		s.inject(req.resource, obj)
	}
	if body, err = json.Marshal(obj); err != nil {
		return err
	}
	setBody(resp, body)
	return nil
}

// setBody makes body resp's body.
func setBody(resp *http.Response, body []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// setStream makes body, of unknown length, resp's body.
func setStream(resp *http.Response, body io.ReadCloser) {
	resp.Body = body
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
}

// rewriteWatch returns body's watch events with the noted fields put into each event's object.
func (s *futureServer) rewriteWatch(resource string, body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer body.Close()
		dec := json.NewDecoder(body)
		dec.UseNumber()
		for {
			var ev map[string]any
			if err := dec.Decode(&ev); err != nil {
				pw.CloseWithError(err)
				return
			}
			if obj, ok := ev["object"].(map[string]any); ok {
				s.inject(resource, obj)
			}
			b, err := json.Marshal(ev)
			if err == nil {
				_, err = pw.Write(append(b, '\n'))
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// modifyProtobuf gives each Deployment or ReplicaSet in a protobuf response or watch stream that has noted spec
// fields an unknown field in its spec message.
func (s *futureServer) modifyProtobuf(resp *http.Response, resource string, watching bool) error {
	mark := func(_ string, msg []byte) []byte {
		var m metav1.PartialObjectMetadata // metadata is field 1 of every object; the rest is skipped
		if err := m.Unmarshal(msg); err != nil {
			return msg
		}
		for p := range s.unknown(resource, m.Namespace, m.Name) {
			if strings.HasPrefix(p, "spec.") {
				return futurewire.AppendField(msg, "future", futurewire.PodSpec...)
			}
		}
		return msg
	}
	if watching {
		pr, pw := io.Pipe()
		body := resp.Body
		go func() {
			defer body.Close()
			pw.CloseWithError(futurewire.RewriteWatch(pw, body, mark))
		}()
		setStream(resp, pr)
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		body, err = futurewire.Rewrite(body, mark)
	}
	if err != nil {
		return err
	}
	setBody(resp, body)
	return nil
}
