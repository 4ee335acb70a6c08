package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"
	testingclock "k8s.io/utils/clock/testing"
)

const testServer = "https://203.0.113.1:6443"

// bufferedContext returns a context whose logger records into a buffer, and a function returning the entries so far.
func bufferedContext(t *testing.T) (context.Context, func() ktesting.Log) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	return klog.NewContext(context.Background(), logger), buf.Data
}

// kv returns the value logged under key in e, or nil.
func kv(e ktesting.LogEntry, key string) any {
	for i := 0; i+1 < len(e.ParameterKVList); i += 2 {
		if e.ParameterKVList[i] == key {
			return e.ParameterKVList[i+1]
		}
	}
	return nil
}

// connectionLogStep is one step of TestAPIServerConnectionLogs's scenario: it advances the clock by after,
// then observes err.
type connectionLogStep struct {
	name  string
	after time.Duration
	err   error
	// want is the one line logged ("" for none): its message, error and duration key and value.
	wantMsg      string
	wantErr      error
	wantKey      string
	wantDuration time.Duration
}

// connectionLogSteps is one outage scenario, step by step, failing with refused and unavailable.
func connectionLogSteps(refused, unavailable error) []connectionLogStep {
	return []connectionLogStep{
		{name: "reachable at start logs nothing", err: nil},
		{name: "first failure logs at once", after: 5 * time.Second, err: refused,
			wantMsg: "API server is unreachable", wantErr: refused, wantKey: "since", wantDuration: 0},
		{name: "second failure is rate-limited", after: 5 * time.Second, err: refused},
		{name: "another cause within LogEvery is rate-limited", after: 20 * time.Second, err: unavailable},
		{name: "failure LogEvery after the last line logs", after: 5 * time.Second, err: unavailable,
			wantMsg: "API server is unreachable", wantErr: unavailable, wantKey: "since", wantDuration: 30 * time.Second},
		{name: "failure just under LogEvery later is rate-limited", after: 30*time.Second - time.Millisecond, err: refused},
		{name: "recovery logs once with the outage's length", after: 5 * time.Second, err: nil,
			wantMsg: "API server is reachable again", wantKey: "unreachableFor", wantDuration: 65*time.Second - time.Millisecond},
		{name: "staying reachable logs nothing", after: 5 * time.Second, err: nil},
		{name: "a new outage logs at once", after: 5 * time.Second, err: refused,
			wantMsg: "API server is unreachable", wantErr: refused, wantKey: "since", wantDuration: 0},
	}
}

func TestAPIServerConnectionLogs(t *testing.T) {
	refused := errors.New("dial tcp 203.0.113.1:6443: connect: connection refused")
	unavailable := errors.New("GET /readyz: HTTP 500: [-]etcd failed: reason withheld")
	steps := connectionLogSteps(refused, unavailable)
	ctx, logs := bufferedContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	c := &apiServerConnection{server: testServer, clock: clk, interval: 5 * time.Second, logEvery: 30 * time.Second}
	seen := 0
	for _, step := range steps {
		clk.Step(step.after)
		c.observe(ctx, step.err)
		all := logs()
		got := all[seen:]
		seen = len(all)
		checkLogged(t, step, got)
	}
}

// checkLogged checks that got is the one line step wants, or nothing when it wants none.
func checkLogged(t *testing.T, step connectionLogStep, got []ktesting.LogEntry) {
	t.Helper()
	if step.wantMsg == "" {
		if len(got) != 0 {
			t.Errorf("%s: logged %+v, want nothing", step.name, got)
		}
		return
	}
	if len(got) != 1 {
		t.Errorf("%s: logged %d lines %+v, want one %q", step.name, len(got), got, step.wantMsg)
		return
	}
	e := got[0]
	wantType := ktesting.LogInfo
	if step.wantErr != nil {
		wantType = ktesting.LogError
	}
	if e.Type != wantType || e.Message != step.wantMsg || e.Err != step.wantErr {
		t.Errorf("%s: logged %s %q err=%v, want %s %q err=%v", step.name, e.Type, e.Message, e.Err, wantType, step.wantMsg, step.wantErr)
	}
	if server := kv(e, "server"); server != testServer {
		t.Errorf("%s: server=%v, want %s", step.name, server, testServer)
	}
	if d := kv(e, step.wantKey); d != step.wantDuration {
		t.Errorf("%s: %s=%v, want %v", step.name, step.wantKey, d, step.wantDuration)
	}
}

func TestAPIServerConnectionCheck(t *testing.T) {
	refused := errors.New("dial tcp 203.0.113.1:6443: connect: connection refused")
	for _, tc := range []struct {
		name     string
		observed []error // probe results, 10s apart
		want     []string
	}{
		{"not probed yet", nil, []string{"API server " + testServer + " not probed yet"}},
		{"reachable", []error{nil}, nil},
		{"unreachable", []error{nil, refused, refused},
			[]string{"API server " + testServer + " is unreachable (for 10s)", "connection refused"}},
		{"reachable again", []error{refused, nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := bufferedContext(t)
			clk := testingclock.NewFakeClock(time.Now())
			c := &apiServerConnection{server: testServer, clock: clk, interval: 10 * time.Second, logEvery: 30 * time.Second}
			for i, err := range tc.observed {
				if i > 0 {
					clk.Step(10 * time.Second)
				}
				c.observe(ctx, err)
			}
			if c.Name() != "apiserver-connection" {
				t.Errorf("Name() = %q", c.Name())
			}
			err := c.Check(nil)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check() = nil, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestAPIServerConnectionRunProbesAndStops(t *testing.T) {
	ctx, logs := bufferedContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := testingclock.NewFakeClock(time.Now())
	probes := make(chan struct{})
	var n atomic.Int32
	c := &apiServerConnection{server: testServer, clock: clk, interval: 5 * time.Second, logEvery: 30 * time.Second,
		probe: func(ctx context.Context) error {
			probes <- struct{}{}
			if n.Add(1) == 1 {
				return nil
			}
			<-ctx.Done() // the second probe is in flight when run is stopped
			return ctx.Err()
		}}
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()

	waitFor(t, probes, "the first probe, at once")
	waitUntil(t, "run to wait for the next probe", clk.HasWaiters)
	clk.Step(5 * time.Second)
	waitFor(t, probes, "the second probe, an interval later")
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	if err := c.Check(nil); err != nil {
		t.Errorf("Check() = %v after a probe cut short by stopping, want nil (the cut-short probe is ignored)", err)
	}
	if got := logs(); len(got) != 0 {
		t.Errorf("logged %+v, want nothing", got)
	}
}

// waitFor waits for one value on ch, failing the test after a generous deadline.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitUntil polls cond, failing the test after a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProbeAPIServer(t *testing.T) {
	forbidden := func(w http.ResponseWriter, path string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"x\" cannot get path \"%s\"","reason":"Forbidden","code":403}`, path)
	}
	ok := func(w http.ResponseWriter, _ string) { io.WriteString(w, "ok") }
	for _, tc := range []struct {
		name      string
		readyz    func(w http.ResponseWriter, path string)
		version   func(w http.ResponseWriter, path string)
		wantErr   string // "" for nil
		wantPaths []string
	}{
		{name: "ready", readyz: ok, wantPaths: []string{"/readyz"}},
		{name: "not ready", readyz: func(w http.ResponseWriter, _ string) {
			http.Error(w, "[+]ping ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n[-]shutdown failed: reason withheld\nreadyz check failed", http.StatusInternalServerError)
		}, wantErr: "GET /readyz: HTTP 500: [-]etcd failed: reason withheld; [-]shutdown failed: reason withheld", wantPaths: []string{"/readyz"}},
		{name: "unavailable", readyz: func(w http.ResponseWriter, _ string) {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
		}, wantErr: "GET /readyz: HTTP 503: the server is currently unable to handle the request", wantPaths: []string{"/readyz"}},
		{name: "unauthorized", readyz: func(w http.ResponseWriter, _ string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
		}, wantErr: "GET /readyz: HTTP 401: ", wantPaths: []string{"/readyz"}},
		{name: "readyz forbidden, version ok", readyz: forbidden, version: ok, wantPaths: []string{"/readyz", "/version"}},
		{name: "both forbidden: the server answered", readyz: forbidden, version: forbidden, wantPaths: []string{"/readyz", "/version"}},
		{name: "readyz forbidden, version failing", readyz: forbidden, version: func(w http.ResponseWriter, _ string) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, wantErr: "GET /version: HTTP 500", wantPaths: []string{"/readyz", "/version"}},
		{name: "no answer in time", readyz: func(w http.ResponseWriter, _ string) {
			time.Sleep(200 * time.Millisecond)
		}, wantErr: "GET /readyz: no response within 100ms", wantPaths: []string{"/readyz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, requested := probedServer(t, tc.readyz, tc.version)
			err := probeAPIServer(restClient(t, url), 100*time.Millisecond)(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("probe = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("probe = %v, want an error containing %q", err, tc.wantErr)
			}
			if paths := requested(); strings.Join(paths, ",") != strings.Join(tc.wantPaths, ",") {
				t.Errorf("requested %v, want %v (one attempt each)", paths, tc.wantPaths)
			}
		})
	}
}

// probedServer starts an HTTP server, closed when t ends, that answers /readyz with readyz and /version with
// version (404 when nil, and for other paths); it returns its URL and a function returning the paths
// requested so far, in order.
func probedServer(t *testing.T, readyz, version func(w http.ResponseWriter, path string)) (string, func() []string) {
	var (
		mu    sync.Mutex
		paths []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch {
		case r.URL.Path == "/readyz" && readyz != nil:
			readyz(w, r.URL.Path)
		case r.URL.Path == "/version" && version != nil:
			version(w, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(paths)
	}
}

func TestProbeAPIServerNamesTLSErrors(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	// Our client does not trust the test server's certificate.
	err := probeAPIServer(restClient(t, srv.URL), 5*time.Second)(context.Background())
	t.Logf("probe: %v", err)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("probe = %v, want a TLS error naming %s", err, srv.URL)
	}
}

// restClient returns the discovery REST client for host, as the manager builds it.
func restClient(t *testing.T, host string) rest.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return cs.Discovery().RESTClient()
}

// syncBuffer is a bytes.Buffer safe for one writer goroutine and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the lines of b containing s.
func (b *syncBuffer) lines(s string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// textContext returns a context whose logger writes klog text lines, as `kubedeploy controllers` does, to a buffer.
func textContext() (context.Context, *syncBuffer) {
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	return klog.NewContext(context.Background(), logger), &buf
}

func TestAPIServerConnectionAgainstStoppedServer(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := httptest.NewServer(handler)
	addr := srv.Listener.Addr().String()
	ctx, logs := textContext()
	ctx, cancel := context.WithCancel(ctx)
	c := newAPIServerConnection(srv.URL, restClient(t, srv.URL), Connectivity{
		ProbeInterval: 10 * time.Millisecond, ProbeTimeout: 5 * time.Second, LogEvery: time.Hour})
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	defer func() { cancel(); <-done }()

	waitUntil(t, "the first probe to pass", func() bool { return c.Check(nil) == nil })

	srv.Close()
	waitUntil(t, "an unreachable line", func() bool { return len(logs.lines("API server is unreachable")) > 0 })
	line := logs.lines("API server is unreachable")[0]
	t.Logf("log: %s", line)
	for _, want := range []string{`server="` + srv.URL + `"`, "connection refused", `since="0s"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q does not contain %q", line, want)
		}
	}
	err := c.Check(nil)
	t.Logf("readyz check: %v", err)
	if err == nil || !strings.Contains(err.Error(), "API server "+srv.URL+" is unreachable") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Check() = %v, want an error naming %s and connection refused", err, srv.URL)
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
	srv.Start()
	defer srv.Close()
	waitUntil(t, "a reachable-again line", func() bool { return len(logs.lines("API server is reachable again")) > 0 })
	line = logs.lines("API server is reachable again")[0]
	t.Logf("log: %s", line)
	if !strings.Contains(line, `server="`+srv.URL+`"`) || !strings.Contains(line, "unreachableFor=") {
		t.Errorf("log line %q, want server and unreachableFor", line)
	}
	if err := c.Check(nil); err != nil {
		t.Errorf("Check() = %v after recovery, want nil", err)
	}
	if n := len(logs.lines("API server is unreachable")); n != 1 {
		t.Errorf("%d unreachable lines within LogEvery (1h), want 1", n)
	}
}

// unusedServerURL returns an https URL on a loopback port nobody listens on: connection refused.
func unusedServerURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "https://" + l.Addr().String()
}

// insecureGet GETs base+path, trusting any certificate, and returns the status code and body.
func insecureGet(t *testing.T, base, path string) (int, string) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestRunReportsUnreachableAPIServer(t *testing.T) {
	server := unusedServerURL(t)
	serving, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + serving.Addr().String()

	ctx, logs := textContext()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			RESTConfig:     &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
			Controllers:    KnownControllers,
			LeaderElection: LeaderElection{Enabled: true}, // a standby: it never gets the Lease
			Serving:        Serving{Listener: serving},
			Connectivity:   Connectivity{ProbeInterval: 50 * time.Millisecond},
		})
	}()

	waitUntil(t, "an unreachable line", func() bool { return len(logs.lines("API server is unreachable")) > 0 })
	line := logs.lines("API server is unreachable")[0]
	t.Logf("log: %s", line)
	if !strings.Contains(line, `server="`+server+`"`) || !strings.Contains(line, "connection refused") {
		t.Errorf("log line %q, want server %s and connection refused", line, server)
	}
	get := func(path string) (int, string) { return insecureGet(t, base, path) }
	code, body := get("/readyz")
	t.Logf("/readyz: %d %q", code, body)
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]apiserver-connection failed") {
		t.Errorf("/readyz = %d %q, want 500 with a failed apiserver-connection check", code, body)
	}
	for _, path := range []string{"/livez", "/healthz"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("%s = %d %q, want 200: an API server outage must not fail liveness", path, code, body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestConnectivityDefaults(t *testing.T) {
	var c Config
	c.Default()
	want := Connectivity{ProbeInterval: 5 * time.Second, ProbeTimeout: 5 * time.Second, LogEvery: 30 * time.Second}
	if c.Connectivity != want {
		t.Errorf("Connectivity defaults = %+v, want %+v", c.Connectivity, want)
	}
	set := Connectivity{ProbeInterval: time.Millisecond, ProbeTimeout: 2 * time.Millisecond, LogEvery: 3 * time.Millisecond}
	kept := set
	kept.Default()
	if kept != set {
		t.Errorf("Default changed set fields: %+v, want %+v", kept, set)
	}
}
