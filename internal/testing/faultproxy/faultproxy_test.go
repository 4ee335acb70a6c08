package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// eventually is the generous real-time deadline for anything that should
// happen promptly. It only guards against a test hanging; durations the
// proxy waits are asserted on a fake clock (see setupFakeClock).
const eventually = 10 * time.Second

// t0 is the time the tests' fake clocks start at.
var t0 = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// setup starts a fake API server (HTTP/2) and a proxy in front of it, both
// stopped when the test ends.
func setup(t *testing.T, opts Options) (*fakeAPIServer, *Proxy) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := newFakeAPIServer(t, true)
	p, err := Start(ctx, f.config(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(p.Stop)
	return f, p
}

// setupFakeClock is setup with the proxy on a fake clock at t0, which only
// the test moves.
func setupFakeClock(t *testing.T) (*fakeAPIServer, *Proxy, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	f, p := setup(t, Options{Clock: clk})
	return f, p, clk
}

// waitForTimers waits until n timers wait on clk: a Timeout fault, a watch
// stream holding back its next chunk, a DropWatchAfter deadline.
func waitForTimers(t *testing.T, clk *clocktesting.FakeClock, n int, what string) {
	t.Helper()
	poll(t, what, func() bool { return clk.Waiters() == n })
}

func clientset(t *testing.T, p *Proxy) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	return cs
}

// response is what a raw request got back.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request through base (the proxy, with a bogus bearer token
// the proxy must not pass on) and reads the whole answer.
func do(t *testing.T, base, method, path, body string) response {
	t.Helper()
	return doWith(t, http.DefaultClient, "bogus-client-token", base, method, path, body)
}

func doWith(t *testing.T, c *http.Client, token, base, method, path, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// poll waits until cond holds, failing the test with what if it does not
// within eventually.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, eventually, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestPassthrough(t *testing.T) {
	f, p := setup(t, Options{})
	direct := f.srv.Client()
	podBody := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod-new"},"status":{"phase":"Running"}}`
	cases := []struct {
		name, method, path, body string
		wantCode                 int
		wantBody                 string
		wantForwarded            string
	}{
		{"list", http.MethodGet, "/api/v1/namespaces/ns/pods", "", http.StatusOK, `"name":"pod-a"`, "list pods"},
		{"get", http.MethodGet, "/api/v1/namespaces/ns/pods/pod-a", "", http.StatusOK, `"uid":"uid-pod-a"`, "get pods"},
		{"get missing", http.MethodGet, "/api/v1/namespaces/ns/pods/missing", "", http.StatusNotFound, `"reason":"NotFound"`, "get pods"},
		{"create", http.MethodPost, "/api/v1/namespaces/ns/pods", podBody, http.StatusCreated, `"phase":"Running"`, "create pods"},
		{"update status", http.MethodPut, "/api/v1/namespaces/ns/pods/pod-new/status", podBody, http.StatusOK, `"phase":"Running"`, "update pods/status"},
		{"list other group", http.MethodGet, "/apis/apps/v1/namespaces/ns/replicasets", "", http.StatusOK, `"ReplicaSetList"`, "list replicasets"},
		{"non-resource", http.MethodGet, "/version", "", http.StatusOK, `"v1.36.3-fake"`, "get /version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Stats().Forwarded[tc.wantForwarded]
			got := do(t, p.URL(), tc.method, tc.path, tc.body)
			want := doWith(t, direct, fakeToken, f.srv.URL, tc.method, tc.path, tc.body)
			if got.code != tc.wantCode || want.code != tc.wantCode {
				t.Errorf("status: proxy %d, direct %d, want %d", got.code, want.code, tc.wantCode)
			}
			if !bytes.Equal(got.body, want.body) {
				t.Errorf("proxy body %s differs from direct body %s", got.body, want.body)
			}
			if !bytes.Contains(got.body, []byte(tc.wantBody)) {
				t.Errorf("body %s does not contain %s", got.body, tc.wantBody)
			}
			if n := p.Stats().Forwarded[tc.wantForwarded] - before; n != 1 {
				t.Errorf("Stats.Forwarded[%q] grew by %d, want 1", tc.wantForwarded, n)
			}
		})
	}

	t.Run("clientset", func(t *testing.T) {
		ctx := context.Background()
		cs := clientset(t, p)
		list, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 || list.Items[0].Name != "pod-a" {
			t.Errorf("List = %v, %v; want pod-a", list, err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-b"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		created, err := cs.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil || created.UID != "uid-pod-b" {
			t.Errorf("Create = %v, %v; want uid-pod-b", created, err)
		}
		pod.Status.Phase = corev1.PodRunning
		updated, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil || updated.Status.Phase != corev1.PodRunning {
			t.Errorf("UpdateStatus = %v, %v; want phase Running", updated, err)
		}
		if _, err := cs.CoreV1().Pods("ns").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Get missing: err = %v, want NotFound", err)
		}
	})
}

// faultCase is one case of TestFaults: a fault on every list of pods (or on
// none), and what a client then sees.
type faultCase struct {
	name      string
	fault     Fault
	fraction  float64
	wantCode  int
	wantError func(error) bool
}

func TestFaults(t *testing.T) {
	cases := []faultCase{
		{"TooManyRequests always", TooManyRequests, 1, http.StatusTooManyRequests, apierrors.IsTooManyRequests},
		{"TooManyRequests never", TooManyRequests, 0, http.StatusOK, nil},
		{"InternalError always", InternalError, 1, http.StatusInternalServerError, apierrors.IsInternalError},
		{"InternalError never", InternalError, 0, http.StatusOK, nil},
		{"Timeout always", Timeout, 1, http.StatusGatewayTimeout, apierrors.IsTimeout},
		{"Timeout never", Timeout, 0, http.StatusOK, nil},
	}
	const list = "GET /api/v1/namespaces/ns/pods"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, p := setup(t, Options{})
			p.SetRules(Rule{Resource: "pods", Verb: "list", ErrorFraction: tc.fraction, Fault: tc.fault, TimeoutAfter: 10 * time.Millisecond})
			checkRawFault(t, p, tc)
			checkClientGoFault(t, p, tc)

			wantHits, wantFaults := 2, 0
			if tc.fraction == 1 {
				wantHits, wantFaults = 0, 2
			}
			if n := f.hitCount(list); n != wantHits {
				t.Errorf("API server saw %d lists, want %d", n, wantHits)
			}
			if n := p.Stats().Faults[tc.fault]; n != wantFaults {
				t.Errorf("Stats.Faults[%s] = %d, want %d", tc.fault, n, wantFaults)
			}
		})
	}
}

// checkRawFault lists pods through p over plain HTTP and checks the answer
// as written: the status code, the Retry-After header and the Status body.
func checkRawFault(t *testing.T, p *Proxy, tc faultCase) {
	t.Helper()
	got := do(t, p.URL(), http.MethodGet, "/api/v1/namespaces/ns/pods", "")
	if got.code != tc.wantCode {
		t.Fatalf("status %d, want %d (body %s)", got.code, tc.wantCode, got.body)
	}
	if retry := got.header.Get("Retry-After"); (tc.wantCode == http.StatusTooManyRequests) != (retry == "1") {
		t.Errorf("Retry-After = %q for status %d", retry, got.code)
	}
	if tc.wantError != nil {
		var st metav1.Status
		if err := json.Unmarshal(got.body, &st); err != nil {
			t.Fatalf("body %s is not a Status: %v", got.body, err)
		}
		if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || int(st.Code) != tc.wantCode || st.Message == "" {
			t.Errorf("Status = %+v, want kind Status, apiVersion v1, Failure, code %d, a message", st, tc.wantCode)
		}
	}
}

// checkClientGoFault lists pods through p with client-go, asking for
// protobuf as clientsets do by default, and checks the error it decodes from
// the JSON Status (no retries, so 429 surfaces too).
func checkClientGoFault(t *testing.T, p *Proxy, tc faultCase) {
	t.Helper()
	cfg := p.Config()
	cfg.ContentType = ""
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = cs.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").
		MaxRetries(0).Do(context.Background()).Error()
	switch {
	case tc.wantError == nil && err != nil:
		t.Errorf("client-go error %v, want none", err)
	case tc.wantError != nil && !tc.wantError(err):
		t.Errorf("client-go error %v, want %s", err, tc.fault)
	}
}

// TestTimeoutWaits checks that a Timeout fault answers once the proxy's
// clock has moved by the rule's TimeoutAfter, and not before.
func TestTimeoutWaits(t *testing.T) {
	cases := []struct {
		name         string
		timeoutAfter time.Duration
		wantWait     time.Duration
	}{
		{"default", 0, DefaultTimeoutAfter},
		{"TimeoutAfter", 5 * time.Second, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, p, clk := setupFakeClock(t)
			p.SetRules(Rule{Verb: "get", ErrorFraction: 1, Fault: Timeout, TimeoutAfter: tc.timeoutAfter})
			done := make(chan error, 1)
			cs := clientset(t, p)
			go func() {
				_, err := cs.CoreV1().Pods("ns").Get(context.Background(), "pod-a", metav1.GetOptions{})
				done <- err
			}()
			waitForTimers(t, clk, 1, "the Timeout fault to wait on the clock")

			clk.Step(tc.wantWait - time.Millisecond)
			if !clk.HasWaiters() {
				t.Fatalf("Timeout fault stopped waiting after %v on the clock, want %v", tc.wantWait-time.Millisecond, tc.wantWait)
			}
			select {
			case err := <-done:
				t.Fatalf("Get answered %v after %v on the clock, want no answer before %v", err, tc.wantWait-time.Millisecond, tc.wantWait)
			default:
			}

			clk.Step(time.Millisecond)
			select {
			case err := <-done:
				if !apierrors.IsTimeout(err) {
					t.Errorf("Get: err = %v, want Timeout", err)
				}
			case <-time.After(eventually):
				t.Fatalf("Get did not return within %v of the clock reaching %v", eventually, tc.wantWait)
			}
		})
	}
}

// TestTooManyRequestsRetriedByClientGo documents that client-go retries 429
// with Retry-After by itself: a clientset call succeeds once the faults stop.
func TestTooManyRequestsRetriedByClientGo(t *testing.T) {
	f, p := setup(t, Options{})
	p.SetRules(Rule{Resource: "pods", Verb: "list", ErrorFraction: 1, Fault: TooManyRequests})
	done := make(chan error, 1)
	go func() {
		_, err := clientset(t, p).CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
		done <- err
	}()
	poll(t, "two 429 answers", func() bool { return p.Stats().Faults[TooManyRequests] >= 2 })
	p.SetRules()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("List: %v, want success after client-go's retries", err)
		}
	case <-time.After(eventually):
		t.Fatal("List did not return")
	}
	if n := f.hitCount("GET /api/v1/namespaces/ns/pods"); n != 1 {
		t.Errorf("API server saw %d lists, want 1", n)
	}
}

func TestSeededFaultsReplay(t *testing.T) {
	run := func(seed uint64) []bool {
		_, p := setup(t, Options{Seed: seed})
		p.SetRules(Rule{Resource: "pods", Verb: "list", ErrorFraction: 0.3, Fault: InternalError})
		failed := make([]bool, 200)
		for i := range failed {
			failed[i] = do(t, p.URL(), http.MethodGet, "/api/v1/namespaces/ns/pods", "").code == http.StatusInternalServerError
		}
		if n := p.Stats().Faults[InternalError]; n != count(failed) {
			t.Errorf("Stats.Faults = %d, but %d requests failed", n, count(failed))
		}
		return failed
	}
	a, b := run(42), run(42)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 gave different fault sequences:\n%v\n%v", a, b)
	}
	if n := count(a); n < 30 || n > 90 {
		t.Errorf("%d of 200 requests failed at fraction 0.3, want 30..90", n)
	}
	if slices.Equal(a, run(43)) {
		t.Errorf("seeds 42 and 43 gave the same fault sequence")
	}
	if !slices.Equal(run(0), run(DefaultSeed)) {
		t.Errorf("seed 0 does not mean DefaultSeed")
	}
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func TestAfterForward(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-b"}}
	cases := []struct {
		name      string
		fault     Fault
		create    func(kubernetes.Interface) error
		wantError func(error) bool
	}{
		{"InternalError", InternalError, func(cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
			return err
		}, apierrors.IsInternalError},
		{"Timeout", Timeout, func(cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
			return err
		}, apierrors.IsTimeout},
		{"TooManyRequests", TooManyRequests, func(cs kubernetes.Interface) error {
			return cs.CoreV1().RESTClient().Post().Namespace("ns").Resource("pods").Body(pod).
				MaxRetries(0).Do(context.Background()).Error()
		}, apierrors.IsTooManyRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, p := setup(t, Options{})
			p.SetRules(Rule{Resource: "pods", Verb: "create", ErrorFraction: 1, Fault: tc.fault, AfterForward: true, TimeoutAfter: 10 * time.Millisecond})
			if err := tc.create(clientset(t, p)); !tc.wantError(err) {
				t.Errorf("create: err = %v, want %s", err, tc.fault)
			}
			if n := f.hitCount("POST /api/v1/namespaces/ns/pods"); n != 1 {
				t.Errorf("API server saw %d creates, want exactly 1 (forwarded once, not retried)", n)
			}
			st := p.Stats()
			if st.Forwarded["create pods"] != 1 || st.Faults[tc.fault] != 1 {
				t.Errorf("Stats = %+v, want 1 forwarded create and 1 %s", st, tc.fault)
			}
		})
	}
}

func TestRuleMatching(t *testing.T) {
	type req struct{ method, path string }
	var (
		listPods      = req{http.MethodGet, "/api/v1/namespaces/ns/pods"}
		listPodsOther = req{http.MethodGet, "/api/v1/namespaces/other/pods"}
		watchPods     = req{http.MethodGet, "/api/v1/namespaces/ns/pods?watch=true"}
		getPod        = req{http.MethodGet, "/api/v1/namespaces/ns/pods/pod-a"}
		updatePod     = req{http.MethodPut, "/api/v1/namespaces/ns/pods/pod-a"}
		updateStatus  = req{http.MethodPut, "/api/v1/namespaces/ns/pods/pod-a/status"}
		listRS        = req{http.MethodGet, "/apis/apps/v1/namespaces/ns/replicasets"}
		version       = req{http.MethodGet, "/version"}
		all           = []req{listPods, listPodsOther, watchPods, getPod, updatePod, updateStatus, listRS, version}
	)
	cases := []struct {
		name     string
		rule     *Rule
		wantFail []req
	}{
		{"no rules", nil, nil},
		{"verb list", &Rule{Resource: "pods", Verb: "list"}, []req{listPods, listPodsOther}},
		{"verb watch", &Rule{Verb: "watch"}, []req{watchPods}},
		{"empty verb spares watches", &Rule{Resource: "pods"}, []req{listPods, listPodsOther, getPod, updatePod, updateStatus}},
		{"verb get is not list", &Rule{Verb: "get"}, []req{getPod}},
		{"subresource status", &Rule{Resource: "pods", Subresource: "status"}, []req{updateStatus}},
		{"verb update covers status", &Rule{Resource: "pods", Verb: "update"}, []req{updatePod, updateStatus}},
		{"namespace", &Rule{Namespace: "other"}, []req{listPodsOther}},
		{"other group", &Rule{Resource: "replicasets"}, []req{listRS}},
		{"empty rule spares watches and non-resource requests", &Rule{}, []req{listPods, listPodsOther, getPod, updatePod, updateStatus, listRS}},
	}
	_, p := setup(t, Options{})
	body := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod-a"}}`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rule == nil {
				p.SetRules()
			} else {
				r := *tc.rule
				r.ErrorFraction, r.Fault = 1, InternalError
				p.SetRules(r)
			}
			for _, rq := range all {
				code := statusOnly(t, p.URL(), rq.method, rq.path, body)
				wantFail := slices.Contains(tc.wantFail, rq)
				if failed := code == http.StatusInternalServerError; failed != wantFail || (!failed && code >= 300) {
					t.Errorf("%s %s: status %d, want failure %v", rq.method, rq.path, code, wantFail)
				}
			}
		})
	}
}

// statusOnly sends a request and returns its status code without waiting for
// the body (a watch body never ends).
func statusOnly(t *testing.T, base, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestUpstreamUnreachable(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFakeAPIServer(t, true)
	up := f.config()
	f.srv.Close() // nothing listens at up.Host any more
	p, err := Start(ctx, up, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	_, err = clientset(t, p).CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if code := apierrors.ReasonForError(err); code != metav1.StatusReasonServiceUnavailable {
		t.Errorf("List: err = %v (reason %q), want reason ServiceUnavailable", err, code)
	}
}

func TestWriteKubeconfig(t *testing.T) {
	_, p := setup(t, Options{})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteKubeconfig(path); err != nil {
		t.Fatalf("WriteKubeconfig: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %v, want 0600", mode)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading kubeconfig: %v", err)
	}
	if cfg.Host != p.URL() || cfg.BearerToken != "" || cfg.Username != "" || len(cfg.CertData) != 0 {
		t.Errorf("kubeconfig gives %+v, want host %s and no credentials", cfg, p.URL())
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("List through the kubeconfig: %v", err)
	}
}

func TestConfig(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFakeAPIServer(t, true)
	up := f.config()
	up.QPS, up.Burst, up.UserAgent, up.ContentType = 7, 9, "faultproxy-test", "application/json"
	p, err := Start(ctx, up, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	got := p.Config()
	if got.Host != p.URL() || !strings.HasPrefix(got.Host, "http://127.0.0.1:") {
		t.Errorf("Host = %q, want %q on loopback", got.Host, p.URL())
	}
	if got.QPS != 7 || got.Burst != 9 || got.UserAgent != "faultproxy-test" || got.ContentType != "application/json" {
		t.Errorf("Config = %+v, want QPS, Burst, UserAgent, ContentType of upstream", got)
	}
	if got.BearerToken != "" || len(got.CAData) != 0 {
		t.Errorf("Config carries credentials or TLS: %+v", got)
	}
}

func TestStartErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cases := []struct {
		name     string
		upstream *rest.Config
	}{
		{"nil upstream", nil},
		{"bad host", &rest.Config{Host: "https://[::1"}},
		{"bad CA", &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not a certificate")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(ctx, tc.upstream, Options{})
			if err == nil {
				p.Stop()
				t.Fatal("Start succeeded, want an error")
			}
		})
	}
}

func TestRuleValidate(t *testing.T) {
	cases := []struct {
		name    string
		rule    Rule
		wantErr bool
	}{
		{"empty", Rule{}, false},
		{"fault", Rule{ErrorFraction: 0.5, Fault: Timeout}, false},
		{"delays", Rule{WatchDelay: time.Second, DropWatchAfter: time.Minute}, false},
		{"fraction above 1", Rule{ErrorFraction: 1.5, Fault: InternalError}, true},
		{"negative fraction", Rule{ErrorFraction: -0.1, Fault: InternalError}, true},
		{"fraction without fault", Rule{ErrorFraction: 0.5}, true},
		{"unknown fault", Rule{ErrorFraction: 0.5, Fault: Fault(99)}, true},
		{"negative delay", Rule{WatchDelay: -time.Second}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rule.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	t.Run("SetRules panics on an invalid rule", func(t *testing.T) {
		_, p := setup(t, Options{})
		defer func() {
			if r := recover(); r == nil {
				t.Error("SetRules accepted an invalid rule")
			}
		}()
		p.SetRules(Rule{ErrorFraction: 2})
	})
}

// TestHoldFor: a held request reaches the API server only when its hold ends, and never when its client gives up
// first (a write whose deadline passed while a connection stalled); both are counted.
func TestHoldFor(t *testing.T) {
	f, p, clk := setupFakeClock(t)
	p.SetRules(Rule{Resource: "pods", Verb: "create", HoldFor: 10 * time.Second})
	cs := clientset(t, p)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-a"}}
	created := make(chan error, 1)
	go func() {
		_, err := cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
		created <- err
	}()
	waitForTimers(t, clk, 1, "the create to be held")
	clk.Step(9 * time.Second)
	if n := f.hitCount("POST /api/v1/namespaces/ns/pods"); n != 0 {
		t.Fatalf("the held create reached the API server %d times before its hold ended", n)
	}
	clk.Step(time.Second)
	if err := <-created; err != nil {
		t.Fatalf("create after the hold: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() {
		_, err := cs.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-b"}}, metav1.CreateOptions{})
		abandoned <- err
	}()
	waitForTimers(t, clk, 1, "the second create to be held")
	cancel()
	if err := <-abandoned; err == nil {
		t.Fatal("the abandoned create succeeded")
	}
	poll(t, "the proxy to count the abandoned create", func() bool { return p.Stats().Abandoned["create pods"] == 1 })
	clk.Step(time.Minute)
	if n := f.hitCount("POST /api/v1/namespaces/ns/pods"); n != 1 {
		t.Errorf("the API server got %d creates, want 1 (the abandoned one never forwarded)", n)
	}
	if s := p.Stats(); s.Held["create pods"] != 2 {
		t.Errorf("held %v, want 2 creates", s.Held)
	}
}
