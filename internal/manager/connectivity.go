package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Connectivity defaults.
const (
	DefaultProbeInterval = 5 * time.Second
	DefaultProbeTimeout  = 5 * time.Second
	DefaultLogEvery      = 30 * time.Second
)

// apiServerConnectionCheck is the name of the /readyz check that fails while the API server is unreachable.
const apiServerConnectionCheck = "apiserver-connection"

// Connectivity configures how the manager watches its connection to the API
// server: while the server cannot be reached it logs so (rate-limited) and
// fails the "apiserver-connection" check of /readyz (never /livez or
// /healthz: an outage must not get the process restarted). Zero fields take
// the defaults.
type Connectivity struct {
	// ProbeInterval is the time from the end of one probe to the start of the next (default 5s).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe request (default 5s).
	ProbeTimeout time.Duration
	// LogEvery is the least time between two "API server is unreachable"
	// lines of one outage (default 30s); its first failed probe logs at once.
	LogEvery time.Duration
}

// Default fills zero fields with the defaults.
func (c *Connectivity) Default() {
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, DefaultProbeTimeout)
	c.LogEvery = cmp.Or(c.LogEvery, DefaultLogEvery)
}

// Validate returns an error if a duration is negative.
func (c Connectivity) Validate() error {
	if c.ProbeInterval < 0 || c.ProbeTimeout < 0 || c.LogEvery < 0 {
		return fmt.Errorf("API server probe interval, probe timeout and log interval must not be negative")
	}
	return nil
}

// apiServerConnection probes the API server every interval, logs while it is
// unreachable (the first failed probe at once, then at most once per
// logEvery, and once when it is reachable again) and is the
// "apiserver-connection" healthz.HealthChecker. Build it with
// newAPIServerConnection; the fields set there are its test seams.
type apiServerConnection struct {
	// server is the API server's URL, as logged and reported.
	server string
	// probe returns nil if the API server answered, else the reason it did not.
	probe func(context.Context) error
	clock clock.Clock
	// interval is the time from the end of one probe to the start of the next; logEvery see Connectivity.
	interval, logEvery time.Duration
	// skew, if set, reports the server's version when a probe first succeeds and whenever the server is
	// reachable again (it may have been upgraded meanwhile: IM-8).
	skew *skewReporter

	mu sync.Mutex
	// probed is set once a probe has finished.
	probed bool
	// cause is the last failed probe's error while the server is unreachable, else nil.
	cause error
	// since is the time of the outage's first failed probe; lastLogged of its last error line.
	since, lastLogged time.Time
}

// newAPIServerConnection returns an apiServerConnection that probes the API
// server at URL server through rc with probeAPIServer, on the real clock.
func newAPIServerConnection(server string, rc rest.Interface, c Connectivity) *apiServerConnection {
	return &apiServerConnection{
		skew:     &skewReporter{serverVersion: serverVersionOf(rc, c.ProbeTimeout)},
		server:   server,
		probe:    probeAPIServer(rc, c.ProbeTimeout),
		clock:    clock.RealClock{},
		interval: c.ProbeInterval,
		logEvery: c.LogEvery,
	}
}

// run probes at once, then every interval, until ctx is done; it logs with ctx's logger.
func (c *apiServerConnection) run(ctx context.Context) {
	for {
		c.observe(ctx, c.probe(ctx))
		t := c.clock.NewTimer(c.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// start runs the probes (run) in the background until the returned stop is
// called, which waits for the last probe; they outlive ctx's cancellation
// but keep its values (its logger).
func (c *apiServerConnection) start(ctx context.Context) (stop func()) {
	probeCtx, stopProbing := context.WithCancel(context.WithoutCancel(ctx))
	probing := make(chan struct{})
	go func() { defer close(probing); c.run(probeCtx) }()
	return func() { stopProbing(); <-probing }
}

// observe records one probe's result and logs what changed: the first
// failure, a failure logEvery after the last logged one, or the recovery. A
// probe cut short because ctx is done says nothing about the server and is ignored.
func (c *apiServerConnection) observe(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	c.mu.Lock()
	wasDown, wasProbed := c.cause != nil, c.probed
	c.probed, c.cause = true, err
	logError := false
	switch {
	case err == nil:
	case !wasDown:
		c.since, c.lastLogged, logError = now, now, true
	case now.Sub(c.lastLogged) >= c.logEvery:
		c.lastLogged, logError = now, true
	}
	since := c.since
	c.mu.Unlock()

	switch {
	case logError:
		logger.Error(err, "API server is unreachable", "server", c.server, "since", roundDuration(now.Sub(since)))
	case err == nil && wasDown:
		logger.Info("API server is reachable again", "server", c.server, "unreachableFor", roundDuration(now.Sub(since)))
	}
	if err == nil && (wasDown || !wasProbed) && c.skew != nil {
		if _, readErr := c.skew.check(ctx); readErr != nil {
			logger.Info("Could not read the API server's version", "server", c.server, "err", readErr)
		}
	}
}

// Name is the /readyz check's name, "apiserver-connection".
func (c *apiServerConnection) Name() string { return apiServerConnectionCheck }

// Check returns nil if the last probe reached the API server; else an error
// naming the server and the cause, or saying that no probe has finished yet.
func (c *apiServerConnection) Check(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.probed:
		return fmt.Errorf("API server %s not probed yet", c.server)
	case c.cause != nil:
		return fmt.Errorf("API server %s is unreachable (for %v): %w", c.server, roundDuration(c.clock.Since(c.since)), c.cause)
	}
	return nil
}

// roundDuration rounds d to milliseconds for logs and messages: probes are
// seconds apart, so finer digits are noise.
func roundDuration(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// probeAPIServer returns a probe that GETs /readyz through rc, one attempt
// bounded by timeout. Where /readyz is forbidden it GETs /version instead; if
// that is forbidden too the server has answered, which is all the probe asks.
// Both paths need no RBAC of ours: the default ClusterRoles system:discovery
// and system:public-info-viewer grant them to every authenticated user.
// The probe's errors are those of getPath.
func probeAPIServer(rc rest.Interface, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		err := getPath(ctx, rc, "/readyz", timeout)
		if !apierrors.IsForbidden(err) {
			return describeProbeError("/readyz", timeout, err)
		}
		err = getPath(ctx, rc, "/version", timeout)
		if apierrors.IsForbidden(err) {
			return nil
		}
		return describeProbeError("/version", timeout, err)
	}
}

// getPath GETs path once (no retries), giving up after timeout; it returns
// client-go's error: a *url.Error for a transport failure (refused
// connection, TLS, DNS, deadline) or an apierrors.APIStatus for an HTTP error status.
func getPath(ctx context.Context, rc rest.Interface, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := rc.Get().AbsPath(path).MaxRetries(0).DoRaw(ctx)
	return err
}

// describeProbeError returns err (nil stays nil) with the reason spelled out
// for an operator: a deadline becomes "GET <path>: no response within
// <timeout>: …"; an HTTP error status becomes "GET <path>: HTTP <code>: …"
// with the failed checks of a /readyz body ("[-]etcd failed: reason
// withheld") instead of the whole body. Transport errors already name the URL
// and the cause ("dial tcp …: connect: connection refused") and are kept.
func describeProbeError(path string, timeout time.Duration, err error) error {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("GET %s: no response within %v: %w", path, timeout, err)
	case errors.As(err, &status):
		s := status.Status()
		reason := failedChecks(s)
		if reason == "" {
			reason = s.Message
		}
		return fmt.Errorf("GET %s: HTTP %d: %s", path, s.Code, reason)
	}
	return err
}

// failedChecks returns the "[-]…" lines, joined by "; ", of an unstructured
// response body kept in s, as a failing /readyz or /healthz writes them; "" if there are none.
func failedChecks(s metav1.Status) string {
	if s.Details == nil {
		return ""
	}
	var failed []string
	for _, cause := range s.Details.Causes {
		if cause.Type != metav1.CauseTypeUnexpectedServerResponse {
			continue
		}
		for _, line := range strings.Split(cause.Message, "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "[-]") {
				failed = append(failed, line)
			}
		}
	}
	return strings.Join(failed, "; ")
}
