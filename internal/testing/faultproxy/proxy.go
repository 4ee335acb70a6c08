package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultSeed seeds the fault choice when Options.Seed is 0.
const DefaultSeed uint64 = 0x6b75626564706c79 // "kubedply"

// shutdownGrace is how long Stop lets in-flight requests finish before it
// cancels them.
const shutdownGrace = 2 * time.Second

// Options configure a Proxy.
type Options struct {
	// Seed makes the random choice of which requests fail replayable: the
	// same sequence of requests against the same Rules gets the same faults
	// (0 means DefaultSeed). Concurrent requests reach the random source in
	// an order the proxy does not control.
	Seed uint64
	// Clock is the clock the proxy reads the time from and waits on: the
	// WatchDelay of watch chunks, the DropWatchAfter deadline of watch
	// streams, the TimeoutAfter of Timeout faults and HoldFor (nil means the real
	// clock, clock.RealClock{}). Tests pass a k8s.io/utils/clock/testing
	// FakeClock and step it instead of sleeping. The proxy's AfterFunc
	// callbacks never block and take no lock the proxy holds while it calls
	// the clock, so a fake clock may run them inside Step. Stop's 2s grace
	// and the HTTP server's 30s header read timeout bound network I/O and
	// stay on the real clock.
	Clock clock.WithDelayedExecution
}

// Proxy is a running fault-injecting reverse proxy in front of one API
// server. Its methods are safe for concurrent use.
type Proxy struct {
	logger   klog.Logger
	clock    clock.WithDelayedExecution
	url      string
	upstream *rest.Config
	target   *url.URL
	infos    *request.RequestInfoFactory
	rp       *httputil.ReverseProxy
	srv      *http.Server

	rules atomic.Pointer[[]Rule] // written under mu

	rngMu sync.Mutex
	rng   *rand.Rand

	stopCtx  context.Context // base of every request's context; cancelled last by Stop
	cancel   context.CancelFunc
	stopping chan struct{} // closed when Stop begins
	stopOnce sync.Once
	handlers sync.WaitGroup // running request handlers; Add under mu while !stopped

	mu      sync.Mutex
	stopped bool
	streams map[*watchStream]struct{}
	stats   Stats // WatchesDropped is kept in watchesDropped

	// watchesDropped is Stats.WatchesDropped; atomic because DropWatchAfter
	// counts from a clock callback, which must not take mu (see Options.Clock).
	watchesDropped atomic.Int64
}

// Start listens on 127.0.0.1:0 (plain HTTP) and proxies every request to the
// API server upstream reaches, with upstream's TLS settings and credentials,
// until Stop is called or ctx ends. It logs through klog.FromContext(ctx).
// It returns an error when upstream is nil, its Host or transport settings
// are invalid, or the listener cannot be opened.
func Start(ctx context.Context, upstream *rest.Config, opts Options) (*Proxy, error) {
	if upstream == nil {
		return nil, errors.New("faultproxy: upstream rest.Config is nil")
	}
	target, _, err := rest.DefaultServerUrlFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream host: %w", err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = DefaultSeed
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	logger := klog.FromContext(ctx).WithName("faultproxy")
	stopCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	p := &Proxy{
		logger:   logger,
		clock:    clk,
		url:      "http://" + ln.Addr().String(),
		upstream: rest.CopyConfig(upstream),
		target:   target,
		infos: &request.RequestInfoFactory{
			// RequestInfoFactory still takes the deprecated sets.String.
			APIPrefixes:          sets.String(sets.New("api", "apis")),
			GrouplessAPIPrefixes: sets.String(sets.New("api")),
		},
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stopCtx:  stopCtx,
		cancel:   cancel,
		stopping: make(chan struct{}),
		streams:  map[*watchStream]struct{}{},
		stats:    Stats{Forwarded: map[string]int{}, Faults: map[Fault]int{}},
	}
	p.rules.Store(&[]Rule{})
	p.serveOn(ctx, ln, transport)
	logger.V(1).Info("Fault proxy listening", "url", p.url, "upstream", target.String())
	return p, nil
}

// serveOn builds the reverse proxy (forwarding with transport) and the HTTP
// server, serves on ln, and stops the proxy when ctx ends.
func (p *Proxy) serveOn(ctx context.Context, ln net.Listener, transport http.RoundTripper) {
	stdLog := log.New(logWriter{p.logger}, "", 0)
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		FlushInterval:  -1,
		ModifyResponse: p.wrapWatch,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       stdLog,
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return p.stopCtx },
		ErrorLog:          stdLog,
	}
	go func() {
		if err := p.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.logger.Error(err, "Fault proxy stopped serving")
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.stopping:
		}
	}()
}

// URL returns the proxy's address, "http://127.0.0.1:PORT".
func (p *Proxy) URL() string { return p.url }

// Config returns a new rest.Config for clients of the proxy: Host is URL(),
// it carries no credentials and no TLS settings, and QPS, Burst, UserAgent,
// ContentType and AcceptContentTypes are copied from upstream.
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{
		Host:      p.url,
		QPS:       p.upstream.QPS,
		Burst:     p.upstream.Burst,
		UserAgent: p.upstream.UserAgent,
		ContentConfig: rest.ContentConfig{
			ContentType:        p.upstream.ContentType,
			AcceptContentTypes: p.upstream.AcceptContentTypes,
		},
	}
}

// WriteKubeconfig writes a kubeconfig file (mode 0600) at path whose only
// cluster, user and current context point at URL() without credentials, for
// child processes such as `kubedeploy controllers --kubeconfig`. It returns
// the error of serializing or writing the file.
func (p *Proxy) WriteKubeconfig(path string) error {
	const name = "faultproxy"
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{name: {Server: p.url}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("faultproxy: write kubeconfig: %w", err)
	}
	// WriteToFile keeps the mode of a file that already exists.
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("faultproxy: write kubeconfig: %w", err)
	}
	return nil
}

// SetRules replaces the active rules with a copy of rules (none = forward
// everything untouched). It takes effect immediately: for new requests, for
// the next chunk of every open watch stream (WatchDelay) and for the drop
// deadline of every open watch stream (DropWatchAfter). It panics when a rule
// is invalid (see Rule.Validate): rules are written by tests, and a rule
// silently ignored would let a fault test pass without faults.
func (p *Proxy) SetRules(rules ...Rule) {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			panic(fmt.Sprintf("faultproxy: rule %d: %v", i, err))
		}
	}
	rs := slices.Clone(rules)
	p.mu.Lock()
	p.rules.Store(&rs)
	for s := range p.streams {
		p.scheduleDropLocked(s, rs)
	}
	p.mu.Unlock()
	p.logger.V(2).Info("Fault rules set", "rules", len(rs))
}

// Stop closes every open watch stream (the clients see them end), stops
// listening, lets in-flight requests finish for up to 2s, then cancels the
// rest and returns once every request handler has returned. It is
// idempotent and safe to call concurrently.
func (p *Proxy) Stop() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopped = true
		streams := make([]*watchStream, 0, len(p.streams))
		for s := range p.streams {
			streams = append(streams, s)
		}
		p.mu.Unlock()
		close(p.stopping)
		for _, s := range streams {
			s.drop()
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(p.stopCtx), shutdownGrace)
		defer cancel()
		if err := p.srv.Shutdown(ctx); err != nil {
			p.logger.V(2).Info("Cancelling requests still in flight", "err", err)
		}
		p.cancel()
		_ = p.srv.Close() // only repeats Shutdown's listener error
		p.handlers.Wait()
		p.logger.V(1).Info("Fault proxy stopped", "url", p.url)
	})
}

// enter registers a running request handler; it returns false once Stop has
// begun.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.handlers.Add(1)
	return true
}

// serve classifies one request, then forwards it or answers it with a fault.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		writeStatus(w, failure(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "faultproxy is stopping", nil))
		return
	}
	defer p.handlers.Done()
	info, err := p.infos.NewRequestInfo(r)
	if err != nil {
		writeStatus(w, failure(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil))
		return
	}
	r = r.WithContext(request.WithRequestInfo(r.Context(), info))
	if !p.hold(r, info) {
		return // the client gave up while the request was held: never forwarded
	}
	if rule, ok := p.faultFor(info); ok {
		p.injectFault(w, r, info, rule)
		return
	}
	p.forward(w, r, info)
}

// hold waits the longest HoldFor of the rules matching info (never for a watch) and reports whether the client
// is still there to forward to.
func (p *Proxy) hold(r *http.Request, info *request.RequestInfo) bool {
	var d time.Duration
	for _, rule := range *p.rules.Load() {
		if rule.HoldFor > d && info.Verb != "watch" && rule.matches(info) {
			d = rule.HoldFor
		}
	}
	if d == 0 {
		return true
	}
	key := info.Verb + " " + resourceName(info)
	p.count(&p.stats.Held, key)
	// Read the body now: over HTTP/1.1 the server notices a client that hung up only once the body is read.
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			p.count(&p.stats.Abandoned, key)
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-r.Context().Done():
	case <-p.stopping:
	}
	p.count(&p.stats.Abandoned, key)
	p.logger.V(2).Info("A held request was abandoned by its client", "verb", info.Verb, "resource", resourceName(info), "namespace", info.Namespace)
	return false
}

// count adds one to (*m)[key], making the map when needed.
func (p *Proxy) count(m *map[string]int, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[key]++
}

// faultFor returns the first rule that matches info and fires, rolling the
// seeded random source for fractions strictly between 0 and 1.
func (p *Proxy) faultFor(info *request.RequestInfo) (Rule, bool) {
	for _, r := range *p.rules.Load() {
		if r.mayFault(info) && p.roll(r.ErrorFraction) {
			return r, true
		}
	}
	return Rule{}, false
}

// roll returns true with probability fraction.
func (p *Proxy) roll(fraction float64) bool {
	if fraction >= 1 {
		return true
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.Float64() < fraction
}

// injectFault answers r with rule.Fault, after forwarding r and discarding
// the answer when rule.AfterForward is set (never for a watch).
func (p *Proxy) injectFault(w http.ResponseWriter, r *http.Request, info *request.RequestInfo, rule Rule) {
	afterForward := rule.AfterForward && info.Verb != "watch"
	upstreamCode := 0
	if afterForward {
		dw := &discardWriter{header: http.Header{}}
		p.forward(dw, r, info)
		upstreamCode = dw.code
	}
	p.mu.Lock()
	p.stats.Faults[rule.Fault]++
	p.mu.Unlock()
	p.logger.V(2).Info("Injecting fault", "fault", rule.Fault, "verb", info.Verb, "resource", resourceName(info),
		"namespace", info.Namespace, "name", info.Name, "afterForward", afterForward, "upstreamCode", upstreamCode)
	if rule.Fault == Timeout {
		t := p.clock.NewTimer(rule.timeoutAfter())
		defer t.Stop()
		select {
		case <-t.C():
		case <-p.stopping:
		case <-r.Context().Done():
			return
		}
	}
	writeStatus(w, rule.Fault.status(info))
}

// forward sends r to the API server and copies the answer to w; watch
// answers stream through a watchStream (see wrapWatch).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, info *request.RequestInfo) {
	p.mu.Lock()
	p.stats.Forwarded[info.Verb+" "+resourceName(info)]++
	p.mu.Unlock()
	if info.Verb == "watch" {
		w = &headerFlusher{ResponseWriter: w}
	}
	p.rp.ServeHTTP(w, r)
}

// rewrite points an outgoing request at the API server. The upstream
// transport adds upstream's credentials; a client's own Authorization header
// is dropped so that it cannot replace them.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.target)
	pr.Out.Header.Del("Authorization")
}

// upstreamError answers 502 when the API server cannot be reached.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil {
		p.logger.Error(err, "Upstream request failed", "method", r.Method, "path", r.URL.Path)
	}
	writeStatus(w, failure(http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, "faultproxy: upstream: "+err.Error(), nil))
}

// writeStatus writes st as JSON with st.Code, and a Retry-After header when
// st asks for one, as kube-apiserver does.
func writeStatus(w http.ResponseWriter, st metav1.Status) {
	body, err := json.Marshal(st)
	if err != nil { // a metav1.Status always marshals
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body) // the client may be gone; nothing to do about it
}

// resourceName returns "resource" or "resource/subresource" for a resource
// request and the path for any other.
func resourceName(info *request.RequestInfo) string {
	switch {
	case !info.IsResourceRequest:
		return info.Path
	case info.Subresource != "":
		return info.Resource + "/" + info.Subresource
	}
	return info.Resource
}

// headerFlusher sends the response header to the client as soon as it is
// written, as kube-apiserver does for a watch, so the client's Watch call
// returns before the first (possibly delayed) event.
type headerFlusher struct {
	http.ResponseWriter
}

// WriteHeader writes and flushes the response header.
func (w *headerFlusher) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	_ = http.NewResponseController(w.ResponseWriter).Flush() // best effort: the body flushes too
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *headerFlusher) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// discardWriter receives the API server's answer to a request forwarded
// before an AfterForward fault, keeping only the status code.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) Flush()                      {}
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// logWriter turns the standard library's log lines (http.Server,
// httputil.ReverseProxy) into structured V(4) log entries.
type logWriter struct {
	logger klog.Logger
}

func (w logWriter) Write(b []byte) (int, error) {
	w.logger.V(4).Info("HTTP library message", "message", strings.TrimSpace(string(b)))
	return len(b), nil
}
