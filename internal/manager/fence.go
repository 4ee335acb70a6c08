package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// fencedTransport refuses every write into a namespace outside its claims' buckets (SH-1), and every write into
// a bucket's namespace while that bucket's claim is not valid (SH-2); a write into no namespace needs every claim
// valid. Reads and Events pass. A replica whose claim lapsed writes nothing there, whatever its workers were doing, and a
// set's controllers write only in their buckets' namespaces, whatever their caches held.
//
// A write it lets through carries its claim's end (shard.Fence.Deadline) as its deadline (issue 45): the request's
// context ends then, which abandons the request wherever it is (a stalled connection, a proxy holding it, a
// process paused mid-request and woken late), and kube-apiserver is sent the time left as the request's `timeout`,
// so it stops handling the write at the same instant. A write the API server had already handed to etcd before
// then may still commit just after; docs/sharding.md says what that means.
type fencedTransport struct {
	next   http.RoundTripper
	claims []shard.Claim
	now    func() time.Time
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead || isEventWrite(req.URL.Path) {
		return t.next.RoundTrip(req)
	}
	fences, err := t.fencesFor(req)
	if err != nil {
		return nil, err
	}
	deadline, ok := earliestDeadline(fences)
	if !ok {
		return t.next.RoundTrip(req)
	}
	return t.roundTripBefore(req, deadline)
}

// fencesFor returns the fences a write must hold: its namespace's bucket's, or every claim's for a write into
// no namespace. It returns an error wrapping shard.ErrFenced when one of them is not valid, or the namespace is
// in none of the claims' buckets.
func (t fencedTransport) fencesFor(req *http.Request) ([]*shard.Fence, error) {
	ns, namespaced := requestNamespace(req.URL.Path)
	if !namespaced {
		fences := make([]*shard.Fence, len(t.claims))
		for i, c := range t.claims {
			if !c.Fence.Valid() {
				return nil, shard.ErrFenced
			}
			fences[i] = c.Fence
		}
		return fences, nil
	}
	i := slices.IndexFunc(t.claims, func(c shard.Claim) bool { return c.Range.Contains(ns) })
	if i < 0 {
		return nil, fmt.Errorf("%w: %s %s is in namespace %q, outside this replica's buckets here", shard.ErrFenced, req.Method, req.URL.Path, ns)
	}
	if !t.claims[i].Fence.Valid() {
		return nil, fmt.Errorf("%w: the claim on bucket %d, namespace %q's, is not valid", shard.ErrFenced, t.claims[i].Bucket, ns)
	}
	return []*shard.Fence{t.claims[i].Fence}, nil
}

// earliestDeadline returns the earliest Deadline among fences, and false when none has one.
func earliestDeadline(fences []*shard.Fence) (time.Time, bool) {
	var earliest time.Time
	found := false
	for _, f := range fences {
		if d, ok := f.Deadline(); ok && (!found || d.Before(earliest)) {
			earliest, found = d, true
		}
	}
	return earliest, found
}

// roundTripBefore sends req with its context ending at deadline and, unless a shorter one is there already, the
// time left as the `timeout` query parameter kube-apiserver bounds the request's handling with. The response
// body keeps the context until it is closed. A request cut by the deadline returns an error wrapping both
// shard.ErrFenced and context.DeadlineExceeded.
func (t fencedTransport) roundTripBefore(req *http.Request, deadline time.Time) (*http.Response, error) {
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	left := deadline.Sub(now())
	if left <= 0 {
		return nil, fmt.Errorf("%w: the claim ended before %s %s was sent", shard.ErrFenced, req.Method, req.URL.Path)
	}
	ctx, cancel := context.WithTimeout(req.Context(), left)
	req = req.WithContext(ctx)
	req.URL = withTimeout(req.URL, left)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		cancel()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: the claim ended while %s %s was in flight: %w", shard.ErrFenced, req.Method, req.URL.Path, context.DeadlineExceeded)
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// withTimeout returns a copy of u whose `timeout` query parameter is left (rounded down to the millisecond, at
// least 1 ms), unless u has a shorter one already (then u itself).
func withTimeout(u *url.URL, left time.Duration) *url.URL {
	q := u.Query()
	if cur, err := time.ParseDuration(q.Get("timeout")); err == nil && cur > 0 && cur <= left {
		return u
	}
	q.Set("timeout", max(left.Truncate(time.Millisecond), time.Millisecond).String())
	out := *u
	out.RawQuery = q.Encode()
	return &out
}

// cancelOnClose ends a request's context when its response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// isEventWrite reports whether path is an Event's (core/v1 or events.k8s.io): events say what a sync did, best
// effort, and are no write of a Deployment, ReplicaSet or Pod that SH-1 and SH-2 guard, so an event of a sync that
// finished as its claim ended is still recorded.
func isEventWrite(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 2; i <= 3 && i+2 < len(parts); i++ {
		if parts[i] == "namespaces" {
			return parts[i+2] == "events" // /api/v1/namespaces/<ns>/events…, /apis/<group>/<v>/namespaces/<ns>/events…
		}
	}
	return false
}

// requestNamespace returns the namespace of a request to a namespaced object or collection
// (/api/v1/namespaces/<ns>/… or /apis/<group>/<version>/namespaces/<ns>/…); a request to a namespace object
// itself has none.
func requestNamespace(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" && (i == 2 || i == 3) {
			return parts[i+1], true
		}
	}
	return "", false
}
