package manager

import (
	"errors"
	"fmt"
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

// TestFencedTransportRefusesWritesOutsideTheBucket is SH-1 at the last line: a set's clients send reads
// anywhere, but no write into a namespace outside its buckets; and SH-2 per bucket: a set running two buckets
// writes into one bucket's namespaces only while that bucket's own claim is valid, whatever the other's.
func TestFencedTransportRefusesWritesOutsideTheBucket(t *testing.T) {
	// Three namespaces in three different quarters of the hash space; the set runs the first two quarters'
	// buckets.
	quarter := func(ns string) uint64 { return shard.Hash(ns) >> 62 }
	byQuarter := map[uint64]string{}
	for i := 0; len(byQuarter) < 4; i++ {
		ns := fmt.Sprintf("team-%d", i)
		if _, ok := byQuarter[quarter(ns)]; !ok {
			byQuarter[quarter(ns)] = ns
		}
	}
	a, b, out := byQuarter[0], byQuarter[1], byQuarter[2]
	rangeOf := func(q uint64) shard.Range { return shard.Range{Start: q << 62, Last: q<<62 | (1<<62 - 1)} }
	fenceA, fenceB := shard.NewFence(func() bool { return true }), shard.NewFence(func() bool { return true })
	sent := 0
	tr := fencedTransport{next: roundTripperFunc(func(*http.Request) (*http.Response, error) { sent++; return &http.Response{StatusCode: 200}, nil }),
		claims: []shard.Claim{{Bucket: 0, Range: rangeOf(0), Fence: fenceA}, {Bucket: 1, Range: rangeOf(1), Fence: fenceB}}}
	try := func(method, path string, refused bool) {
		t.Helper()
		req, _ := http.NewRequest(method, "https://127.0.0.1"+path, nil)
		_, err := tr.RoundTrip(req)
		if got := errors.Is(err, shard.ErrFenced); got != refused {
			t.Errorf("%s %s: refused %v, want %v (err %v)", method, path, got, refused, err)
		}
	}
	pods := func(ns string) string { return "/api/v1/namespaces/" + ns + "/pods" }
	try(http.MethodGet, pods(out), false)
	try(http.MethodPost, pods(a), false)
	try(http.MethodPatch, pods(b), false)
	try(http.MethodPost, pods(out), true)
	try(http.MethodDelete, pods(out), true)
	try(http.MethodPost, "/api/v1/nodes", false)
	fenceB.Revoke() // bucket 1 is being cut: its namespaces take no more writes, bucket 0's still do
	try(http.MethodPatch, pods(b), true)
	try(http.MethodPatch, pods(a), false)
	try(http.MethodPost, "/api/v1/nodes", true)
	try(http.MethodGet, pods(b), false)
	if sent != 6 {
		t.Errorf("%d requests sent, want 6", sent)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
