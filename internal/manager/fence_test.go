package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// A write through fencedTransport carries its claim's end (issue 45): its context ends then and kube-apiserver is
// sent the time left as `timeout`; a write still in flight at that instant is abandoned with an error wrapping
// shard.ErrFenced and context.DeadlineExceeded; a write whose claim has already ended is not sent; a response's
// context lasts until its body is closed; reads carry nothing.
func TestFencedTransportCarriesTheClaimsEnd(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	until := now.Add(80 * time.Millisecond)
	fence := shard.NewFenceUntil(func() time.Time { return until }, func() time.Time { return now })
	claims := []shard.Claim{{Bucket: 0, Range: shard.Range{Start: 0, Last: ^uint64(0)}, Fence: fence}}
	var seen *http.Request
	stall := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		<-r.Context().Done() // a proxy holding the request, a stalled connection
		return nil, r.Context().Err()
	})
	tr := fencedTransport{next: stall, claims: claims, now: func() time.Time { return now }}
	req, _ := http.NewRequest(http.MethodPatch, "https://127.0.0.1/api/v1/namespaces/team-a/pods/p?fieldManager=x", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, shard.ErrFenced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled write: err %v, want ErrFenced and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the stalled write was abandoned after %v, want about 80ms", took)
	}
	if got := seen.URL.Query().Get("timeout"); got != "80ms" || seen.URL.Query().Get("fieldManager") != "x" {
		t.Errorf("sent query %q, want timeout=80ms beside the request's own parameters", seen.URL.RawQuery)
	}
	if req.URL.Query().Get("timeout") != "" {
		t.Errorf("the caller's request was changed: %s", req.URL)
	}

	var body *http.Request
	ok := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		body = r
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	tr.next = ok
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if body.Context().Err() != nil {
		t.Errorf("the context ended before the body was read")
	}
	resp.Body.Close()
	if body.Context().Err() == nil {
		t.Errorf("closing the body did not end the request's context")
	}

	get, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1/api/v1/namespaces/team-a/pods", nil)
	if _, err := tr.RoundTrip(get); err != nil || body.URL.Query().Has("timeout") {
		t.Errorf("a read: err %v, query %q; want it passed as it is", err, body.URL.RawQuery)
	}
	now = until // the claim has ended: nothing is sent
	body = nil
	if _, err := tr.RoundTrip(req); !errors.Is(err, shard.ErrFenced) || body != nil {
		t.Errorf("write after the claim's end: err %v, sent %v", err, body != nil)
	}
}

// withTimeout keeps a shorter timeout the request has, and never sends less than a millisecond.
func TestWithTimeout(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://h/api/v1/namespaces/a/pods?timeout=1s", nil)
	if got := withTimeout(req.URL, 5*time.Second).Query().Get("timeout"); got != "1s" {
		t.Errorf("shorter timeout replaced: %s", got)
	}
	if got := withTimeout(req.URL, 300*time.Millisecond).Query().Get("timeout"); got != "300ms" {
		t.Errorf("longer timeout kept: %s", got)
	}
	if got := withTimeout(req.URL, 10*time.Microsecond).Query().Get("timeout"); got != "1ms" {
		t.Errorf("sub-millisecond timeout: %s", got)
	}
}

// An Event is written whatever the claims (best effort, no workload write); a namespace named "events" is not an
// Event.
func TestIsEventWrite(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v1/namespaces/team-a/events":                      true,
		"/api/v1/namespaces/team-a/events/web.1":                true,
		"/apis/events.k8s.io/v1/namespaces/team-a/events":       true,
		"/api/v1/namespaces/events/pods":                        false,
		"/api/v1/namespaces/team-a/pods/events":                 false,
		"/apis/apps/v1/namespaces/team-a/replicasets/web/scale": false,
	} {
		if got := isEventWrite(path); got != want {
			t.Errorf("isEventWrite(%q) = %v, want %v", path, got, want)
		}
	}
}
