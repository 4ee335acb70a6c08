package faultproxy

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// DefaultTimeoutAfter is how long the proxy waits before answering a Timeout
// fault when the Rule's TimeoutAfter is 0.
const DefaultTimeoutAfter = time.Second

// Fault is the error a Rule answers a request with.
type Fault int

const (
	// TooManyRequests answers 429 with the header "Retry-After: 1" and a
	// metav1.Status of reason TooManyRequests (apierrors.IsTooManyRequests).
	// client-go retries such answers by itself (up to 10 times, waiting the
	// Retry-After second each time), so callers see it only as latency unless
	// every retry fails too.
	TooManyRequests Fault = iota + 1
	// InternalError answers 500 with a metav1.Status of reason InternalError
	// (apierrors.IsInternalError). client-go does not retry it.
	InternalError
	// Timeout waits the Rule's TimeoutAfter and then answers 504 with a
	// metav1.Status of reason Timeout (apierrors.IsTimeout). client-go does
	// not retry it.
	Timeout
)

// String returns the Fault's name ("TooManyRequests", "InternalError",
// "Timeout"), or "Fault(n)" for an unknown value.
func (f Fault) String() string {
	switch f {
	case TooManyRequests:
		return "TooManyRequests"
	case InternalError:
		return "InternalError"
	case Timeout:
		return "Timeout"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Rule selects requests and says what to do to them. A request matches a Rule
// when every non-empty selector equals the request's RequestInfo (as
// kube-apiserver computes it); only resource requests match (discovery,
// /version, /healthz and other non-resource requests are always forwarded).
//
// When several Rules match a request: the watch delay is the largest
// WatchDelay among them, the drop deadline the smallest non-zero
// DropWatchAfter, and for faults the Rules are tried in order, each with its
// own ErrorFraction; the first that fires answers the request.
type Rule struct {
	// Resource and Verb select requests, as kube-apiserver's RequestInfo
	// names them: Resource "pods", "replicasets", "deployments", "leases" …;
	// Verb "get", "list", "watch", "create", "update", "patch", "delete",
	// "deletecollection". Empty matches any.
	Resource, Verb string
	// Subresource selects "status", "scale" …; empty matches any, including
	// requests to the resource itself.
	Subresource string
	// Namespace restricts the rule to one namespace; empty matches any,
	// including cluster-scoped requests.
	Namespace string

	// WatchDelay holds back every byte of matching watch responses for this
	// long, keeping their order. It applies to watch streams opened before
	// the Rule was set, too: the delay of a chunk is decided when the chunk
	// arrives from the API server, and chunks are never reordered
	// (deliverAt = max(previous deliverAt, arrival + delay)).
	WatchDelay time.Duration
	// DropWatchAfter closes matching watch streams this long after they
	// opened (0 = never); the client sees the stream end cleanly, as when the
	// API server ends a watch. Setting it with SetRules also applies to open
	// streams: one already open longer than DropWatchAfter is closed at once.
	DropWatchAfter time.Duration

	// ErrorFraction, in [0,1], is the share of matching requests answered
	// with Fault instead of being forwarded (or, with AfterForward, after
	// being forwarded). Which requests fail is chosen by the proxy's seeded
	// random source. Watch requests get faults only from Rules whose Verb is
	// exactly "watch".
	ErrorFraction float64
	// Fault is the answer for the requests ErrorFraction selects; required
	// when ErrorFraction > 0.
	Fault Fault
	// AfterForward sends the request to the API server first, discards its
	// answer and then returns Fault: the write happened but the client sees
	// an error (the ambiguous failure real clusters produce on timeouts).
	// Watch requests are never forwarded before a fault.
	AfterForward bool
	// TimeoutAfter is how long a Timeout fault waits before answering
	// (0 = DefaultTimeoutAfter). Other faults answer at once.
	TimeoutAfter time.Duration
	// HoldFor holds a matching request (never a watch) this long before
	// forwarding it, as a stalled connection or a paused client would; a
	// request whose client gives up meanwhile is never forwarded (counted in
	// Stats.Abandoned). With several matching Rules the longest applies.
	HoldFor time.Duration
}

// Validate returns an error when ErrorFraction is outside [0,1], Fault is
// unknown while ErrorFraction > 0, or a duration is negative.
func (r Rule) Validate() error {
	var errs []error
	if math.IsNaN(r.ErrorFraction) || r.ErrorFraction < 0 || r.ErrorFraction > 1 {
		errs = append(errs, fmt.Errorf("errorFraction %v is outside [0,1]", r.ErrorFraction))
	}
	if r.ErrorFraction > 0 && (r.Fault < TooManyRequests || r.Fault > Timeout) {
		errs = append(errs, fmt.Errorf("errorFraction %v needs a known Fault, got %v", r.ErrorFraction, r.Fault))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"watchDelay", r.WatchDelay}, {"dropWatchAfter", r.DropWatchAfter}, {"timeoutAfter", r.TimeoutAfter}, {"holdFor", r.HoldFor}} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.d))
		}
	}
	return errors.Join(errs...)
}

// matches reports whether the request described by info is selected by r.
func (r Rule) matches(info *request.RequestInfo) bool {
	return info.IsResourceRequest &&
		(r.Resource == "" || r.Resource == info.Resource) &&
		(r.Subresource == "" || r.Subresource == info.Subresource) &&
		(r.Verb == "" || r.Verb == info.Verb) &&
		(r.Namespace == "" || r.Namespace == info.Namespace)
}

// mayFault reports whether r may answer the request described by info with
// its Fault: it matches, has a non-zero ErrorFraction and, for a watch,
// names the verb "watch" explicitly.
func (r Rule) mayFault(info *request.RequestInfo) bool {
	return r.ErrorFraction > 0 && r.matches(info) && (info.Verb != "watch" || r.Verb == "watch")
}

// timeoutAfter returns how long a Timeout fault of r waits.
func (r Rule) timeoutAfter() time.Duration {
	if r.TimeoutAfter == 0 {
		return DefaultTimeoutAfter
	}
	return r.TimeoutAfter
}

// watchDelay returns the largest WatchDelay of the rules that match info.
func watchDelay(rules []Rule, info *request.RequestInfo) time.Duration {
	var d time.Duration
	for _, r := range rules {
		if r.WatchDelay > d && r.matches(info) {
			d = r.WatchDelay
		}
	}
	return d
}

// dropWatchAfter returns the smallest non-zero DropWatchAfter of the rules
// that match info, or 0 when none asks for a drop.
func dropWatchAfter(rules []Rule, info *request.RequestInfo) time.Duration {
	var d time.Duration
	for _, r := range rules {
		if r.DropWatchAfter > 0 && (d == 0 || r.DropWatchAfter < d) && r.matches(info) {
			d = r.DropWatchAfter
		}
	}
	return d
}

// status returns the metav1.Status the proxy answers with for f, as
// kube-apiserver would write it for the request described by info.
func (f Fault) status(info *request.RequestInfo) metav1.Status {
	details := &metav1.StatusDetails{Name: info.Name, Group: info.APIGroup, Kind: info.Resource}
	switch f {
	case TooManyRequests:
		details.RetryAfterSeconds = 1
		return failure(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			"Too many requests, please try again later (injected by faultproxy)", details)
	case Timeout:
		return failure(http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
			"the server was unable to return a response in the time allotted, but may still be processing the request (injected by faultproxy)", details)
	default:
		details.Causes = []metav1.StatusCause{{Message: "injected by faultproxy"}}
		return failure(http.StatusInternalServerError, metav1.StatusReasonInternalError,
			"Internal error occurred: injected by faultproxy", details)
	}
}

// failure returns a Failure metav1.Status with its TypeMeta set, so that
// client-go decodes it as an API error.
func failure(code int32, reason metav1.StatusReason, message string, details *metav1.StatusDetails) metav1.Status {
	return metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     code,
		Reason:   reason,
		Message:  message,
		Details:  details,
	}
}
