package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// requestKey is one series of kube-apiserver's apiserver_request_total that the bench keeps.
type requestKey struct {
	Code, Verb, Resource, Subresource string
}

// requestCounts are apiserver_request_total values by requestKey.
type requestCounts map[requestKey]float64

// writeVerbs are the verbs apiserver_request_total uses for writes.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

// counted reports whether a request on resource/subresource is one the bench attributes to the controllers:
// any subresource of deployments and replicasets; pods themselves (create and delete), not pods/binding (the
// scheduler) or pods/status (KWOK).
func counted(resource, subresource string) bool {
	switch resource {
	case "deployments", "replicasets":
		return true
	case "pods":
		return subresource == ""
	}
	return false
}

// scrapeRequests reads kube-apiserver's /metrics and returns the apiserver_request_total series of counted
// resources.
func scrapeRequests(ctx context.Context, client kubernetes.Interface) (requestCounts, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parsing kube-apiserver /metrics: %w", err)
	}
	out := requestCounts{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		var k requestKey
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "code":
				k.Code = l.GetValue()
			case "verb":
				k.Verb = l.GetValue()
			case "resource":
				k.Resource = l.GetValue()
			case "subresource":
				k.Subresource = l.GetValue()
			}
		}
		if counted(k.Resource, k.Subresource) {
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// traffic is what a phase cost in API requests.
type traffic struct {
	// Writes counts write requests (any response code) by "VERB resource[/subresource]".
	Writes map[string]int
	// Conflicts counts 409 responses and Unprocessable 422 responses by "VERB resource[/subresource]".
	Conflicts, Unprocessable map[string]int
}

// diffRequests returns the requests counted between before and after, less the bench's own writes (own, keyed
// like Writes).
func diffRequests(before, after requestCounts, own map[string]int) traffic {
	t := traffic{Writes: map[string]int{}, Conflicts: map[string]int{}, Unprocessable: map[string]int{}}
	for k, v := range after {
		n := int(v - before[k])
		if n <= 0 {
			continue
		}
		name := k.Verb + " " + k.Resource
		if k.Subresource != "" {
			name += "/" + k.Subresource
		}
		switch k.Code {
		case "409":
			t.Conflicts[name] += n
		case "422":
			t.Unprocessable[name] += n
		}
		if writeVerbs[k.Verb] {
			t.Writes[name] += n
		}
	}
	for name, n := range own {
		if t.Writes[name] -= n; t.Writes[name] <= 0 {
			delete(t.Writes, name)
		}
	}
	return t
}

// writeCounter counts the bench client's own write requests, keyed like traffic.Writes, so they can be
// subtracted from the API server's counts.
type writeCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// wrap is a rest.Config WrapTransport.
func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if writeVerbs[req.Method] {
			if res, sub := resourceOf(req.URL.Path); counted(res, sub) {
				name := req.Method + " " + res
				if sub != "" {
					name += "/" + sub
				}
				w.mu.Lock()
				if w.n == nil {
					w.n = map[string]int{}
				}
				w.n[name]++
				w.mu.Unlock()
			}
		}
		return rt.RoundTrip(req)
	})
}

// snapshot returns a copy of the counts so far.
func (w *writeCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.n {
		out[k] = v
	}
	return out
}

// since returns the counts in now that are not in before.
func since(before, now map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// resourceOf returns the resource and subresource of a namespaced API path
// (/api/v1/namespaces/ns/pods, /apis/apps/v1/namespaces/ns/deployments/name/status); "" for other paths.
func resourceOf(path string) (resource, subresource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0], rest[2]
			}
			return rest[0], ""
		}
	}
	return "", ""
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
