package manager

import (
	"errors"
	"net/http"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

func TestRequestNamespace(t *testing.T) {
	for _, tc := range []struct {
		path, ns string
		ok       bool
	}{
		{"/api/v1/namespaces/team-a/pods", "team-a", true},
		{"/api/v1/namespaces/team-a/pods/web-1", "team-a", true},
		{"/apis/apps/v1/namespaces/team-b/replicasets/web/status", "team-b", true},
		{"/apis/events.k8s.io/v1/namespaces/team-c/events", "team-c", true},
		{"/api/v1/namespaces", "", false},
		{"/api/v1/namespaces/team-a", "", false},
		{"/api/v1/nodes/n1", "", false},
		{"/apis/apps/v1/deployments", "", false},
	} {
		ns, ok := requestNamespace(tc.path)
		if ns != tc.ns || ok != tc.ok {
			t.Errorf("requestNamespace(%q) = %q, %v; want %q, %v", tc.path, ns, ok, tc.ns, tc.ok)
		}
	}
}

// TestFencedTransportRefusesWritesOutsideTheBucket is SH-1 at the last line: a bucket's clients send reads
// anywhere, but no write into another bucket's namespace (nor any write without a valid claim: SH-2, checked
// in internal/shard).
func TestFencedTransportRefusesWritesOutsideTheBucket(t *testing.T) {
	in, out := "team-a", ""
	for i := range 1000 { // a namespace outside the half of the hash space team-a is in
		if ns := "other-" + string(rune('a'+i%26)) + string(rune('a'+i/26)); shard.Hash(ns)>>63 != shard.Hash(in)>>63 {
			out = ns
			break
		}
	}
	half := shard.Range{Start: shard.Hash(in) >> 63 << 63, Last: shard.Hash(in)>>63<<63 | (1<<63 - 1)}
	fence := shard.NewFence(func() bool { return true })
	sent := 0
	tr := fencedTransport{next: roundTripperFunc(func(*http.Request) (*http.Response, error) { sent++; return &http.Response{StatusCode: 200}, nil }),
		fence: fence, scope: shard.Scope{Ranges: []shard.Range{half}}}
	for _, tc := range []struct {
		method, ns string
		refused    bool
	}{
		{http.MethodGet, out, false},
		{http.MethodPost, in, false},
		{http.MethodPatch, in, false},
		{http.MethodPost, out, true},
		{http.MethodDelete, out, true},
	} {
		req, _ := http.NewRequest(tc.method, "https://127.0.0.1/api/v1/namespaces/"+tc.ns+"/pods", nil)
		_, err := tr.RoundTrip(req)
		if refused := errors.Is(err, shard.ErrFenced); refused != tc.refused {
			t.Errorf("%s in %s: refused %v, want %v (err %v)", tc.method, tc.ns, refused, tc.refused, err)
		}
	}
	if sent != 3 {
		t.Errorf("%d requests sent, want 3", sent)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
