package faultproxy

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// fakeToken is the only credential the fake API server accepts.
const fakeToken = "upstream-token"

// fakeAPIServer is a TLS API server with just enough of the core and apps
// APIs for the proxy tests: pods (list, watch, get, create, update, update
// status) and replicasets (list). Watch streams send one ADDED event per
// index a test puts on events.
type fakeAPIServer struct {
	srv         *httptest.Server
	events      chan int
	openWatches atomic.Int32

	mu   sync.Mutex
	hits map[string]int // "METHOD path" of authorized requests
}

// newFakeAPIServer starts a fake API server, speaking HTTP/2 (as
// kube-apiserver does) when http2 is set; it stops when the test ends.
func newFakeAPIServer(t *testing.T, http2 bool) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{events: make(chan int, 100), hits: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3-fake"})
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", f.listOrWatchPods)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{name}", f.getPod)
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/pods", f.writePod(http.StatusCreated))
	mux.HandleFunc("PUT /api/v1/namespaces/{ns}/pods/{name}", f.writePod(http.StatusOK))
	mux.HandleFunc("PUT /api/v1/namespaces/{ns}/pods/{name}/status", f.writePod(http.StatusOK))
	mux.HandleFunc("GET /apis/apps/v1/namespaces/{ns}/replicasets", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"kind": "ReplicaSetList", "apiVersion": "apps/v1", "items": []any{}})
	})
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			writeJSON(w, http.StatusUnauthorized, statusOf(apierrors.NewUnauthorized("wrong credentials")))
			return
		}
		f.mu.Lock()
		f.hits[r.Method+" "+r.URL.Path]++
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = http2
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// config returns an upstream rest.Config for the fake: its URL, its CA, the
// bearer token it requires and JSON (the fake speaks no protobuf; the proxy's
// Config copies the content type).
func (f *fakeAPIServer) config() *rest.Config {
	return &rest.Config{
		Host:          f.srv.URL,
		BearerToken:   fakeToken,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		TLSClientConfig: rest.TLSClientConfig{
			CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}),
		},
	}
}

// hitCount returns how many authorized requests reached "METHOD path".
func (f *fakeAPIServer) hitCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[key]
}

// send asks an open watch stream to send the event with index i.
func (f *fakeAPIServer) send(i int) { f.events <- i }

func (f *fakeAPIServer) listOrWatchPods(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if watch, _ := strconv.ParseBool(r.URL.Query().Get("watch")); !watch {
		writeJSON(w, http.StatusOK, corev1.PodList{
			TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "10"},
			Items:    []corev1.Pod{*fakePod(ns, "pod-a")},
		})
		return
	}
	f.openWatches.Add(1)
	defer f.openWatches.Add(-1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case i := <-f.events:
			raw, err := json.Marshal(fakePod(ns, fmt.Sprintf("pod-%d", i)))
			if err != nil {
				panic(err)
			}
			ev := metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: raw}}
			if json.NewEncoder(w).Encode(ev) != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

func (f *fakeAPIServer) getPod(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "missing" {
		writeJSON(w, http.StatusNotFound, statusOf(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)))
		return
	}
	writeJSON(w, http.StatusOK, fakePod(r.PathValue("ns"), name))
}

// writePod answers a create or update with the pod it was sent, as stored.
func (f *fakeAPIServer) writePod(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var pod corev1.Pod
		if err := json.NewDecoder(r.Body).Decode(&pod); err != nil {
			writeJSON(w, http.StatusBadRequest, statusOf(apierrors.NewBadRequest(err.Error())))
			return
		}
		stored := fakePod(r.PathValue("ns"), pod.Name)
		stored.Status = pod.Status
		writeJSON(w, code, stored)
	}
}

// fakePod returns a pod with deterministic metadata.
func fakePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
	}
}

// podIndex returns i for a pod named "pod-i", or -1.
func podIndex(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "pod-"))
	if err != nil {
		return -1
	}
	return i
}

func statusOf(err *apierrors.StatusError) metav1.Status {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		_, _ = io.WriteString(w, err.Error())
	}
}
