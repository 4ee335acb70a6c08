package observe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// requests records every request observe mode sends and its status code.
type requests struct {
	mu  sync.Mutex
	all []string // "VERB path status"
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		r.mu.Lock()
		r.all = append(r.all, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, code))
		r.mu.Unlock()
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// observerConfig applies deploy/observe's ServiceAccount, ClusterRole and binding and returns a client
// configuration with that ServiceAccount's token, whose every request rec records.
func observerConfig(ctx context.Context, t *testing.T, rec *requests) *rest.Config {
	t.Helper()
	objs, err := deploy.ObserveObjects()
	if err != nil {
		t.Fatal(err)
	}
	var sa *v1.ServiceAccount
	for _, o := range objs {
		if err := create(ctx, o); err != nil {
			t.Fatalf("applying deploy/observe: %v", err)
		}
		if s, ok := o.(*v1.ServiceAccount); ok {
			sa = s
		}
	}
	tok, err := env.Client.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tok.Status.Token
	cfg.WrapTransport = rec.wrap
	return cfg
}

// create creates the RBAC objects and the namespace of deploy/observe (its Service and Deployment are for a
// real cluster: here observe runs in the test process).
func create(ctx context.Context, o runtime.Object) error {
	var err error
	switch o := o.(type) {
	case *v1.Namespace:
		_, err = env.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *v1.ServiceAccount:
		_, err = env.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = env.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		_, err = env.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	}
	return err
}

// scrape returns the metric families observe serves at base.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return families
}

// value returns the value of the first series of family name whose labels include want, -1 when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// Issue 25: on a cluster whose rollouts kube-controller-manager runs, observe mode with deploy/observe's
// read-only RBAC counts each rollout with its outcome (two complete, one failed at its progress deadline),
// attributes a broken rollout's waiting to image pulls with the kubelet's reason while it runs, and sends only
// reads, none refused; no object's managedFields names it.
func TestObserveUpstreamRollouts(t *testing.T) {
	harness.Skip(t, env)
	ctx := harness.Context(t, 5*time.Minute)
	rec := &requests{}
	base, observer, stop := startObserve(ctx, t, rec)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("observe: %v", err)
		}
	}()
	ns := env.Namespace(t)
	countedRollouts(ctx, t, base, ns)
	// The shadow check: kubedeploy's syncs agree with kube-controller-manager's at every settled state.
	canary := partitionedRollout(ctx, t, ns)
	shadowAgrees(t, base, ns, "web", "broken", canary)
	autoRollbackIgnored(ctx, t, base, observer, ns, canary)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.all {
		if !strings.HasPrefix(r, "GET ") || strings.HasSuffix(r, " 403") || strings.HasSuffix(r, " 401") {
			t.Errorf("observe sent %s: want only reads, none refused", r)
		}
	}
	if len(rec.all) == 0 {
		t.Errorf("no request of observe was recorded")
	}
	checkManagedFields(ctx, t, ns)
}

// startObserve runs observe mode with deploy/observe's ServiceAccount, its requests recorded in rec, and waits
// for it to be ready. It returns the base URL of its metrics, its client configuration and its stop function.
func startObserve(ctx context.Context, t *testing.T, rec *requests) (string, *rest.Config, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	observer := observerConfig(ctx, t, rec)
	stop := env.RunControllers(manager.Config{
		RESTConfig: observer, Controllers: []string{}, Observe: true, ShadowQuiet: shadowQuiet,
		Serving: manager.Serving{Listener: ln},
	})
	harness.Eventually(t, time.Minute, "observe to be ready", func(context.Context) (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return base, observer, stop
}

// countedRollouts rolls Deployment web (4 replicas) twice to completion and Deployment broken once to
// completion and once to an image that cannot be pulled, past its progress deadline, and checks the rollout
// metrics observe serves at base: the waiting on image pulls while it lasts, each rollout's outcome, and the
// broken one's unavailable pods.
func countedRollouts(ctx context.Context, t *testing.T, base, ns string) {
	t.Helper()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "web", 4, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:1.9.3")
	harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)

	broken := harness.NewDeployment(ns, "broken", 2, "nginx:1.9")
	broken.Spec.ProgressDeadlineSeconds = ptr.To[int32](15)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "broken", 2*time.Minute)
	harness.SetImage(ctx, t, env.Client, ns, "broken", "broken", "nginx:broken")
	var stuck float64
	harness.Eventually(t, time.Minute, "the broken rollout to wait on image pulls", func(context.Context) (bool, error) {
		m := scrape(t, base)
		for _, reason := range []string{"ImagePullBackOff", "ErrImagePull"} {
			stuck = max(stuck, value(m, "kubedeploy_deployment_rollout_waiting_seconds",
				map[string]string{"namespace": ns, "deployment": "broken", "waiting_on": "image_pull", "reason": reason}))
		}
		return stuck >= 2 && value(m, "kubedeploy_deployment_rollout_waited_seconds",
			map[string]string{"namespace": ns, "deployment": "broken", "waiting_on": "image_pull"}) >= 2, nil
	})
	harness.Eventually(t, time.Minute, "the broken rollout to fail and every rollout to be counted", func(context.Context) (bool, error) {
		m := scrape(t, base)
		return value(m, "kubedeploy_deployment_rollouts_total", map[string]string{"namespace": ns, "deployment": "broken", "outcome": "failed"}) == 1 &&
			value(m, "kubedeploy_deployment_rollouts_total", map[string]string{"namespace": ns, "deployment": "web", "outcome": "complete"}) == 2 &&
			value(m, "kubedeploy_deployment_rollouts_total", map[string]string{"namespace": ns, "deployment": "broken", "outcome": "complete"}) == 1, nil
	})
	m := scrape(t, base)
	for _, o := range []string{"superseded", "rolled_back"} {
		for _, d := range []string{"web", "broken"} {
			if v := value(m, "kubedeploy_deployment_rollouts_total", map[string]string{"namespace": ns, "deployment": d, "outcome": o}); v > 0 {
				t.Errorf("%s: %v rollouts %s, want none", d, v, o)
			}
		}
	}
	if v := value(m, "kubedeploy_deployment_unavailable_pods", map[string]string{"namespace": ns, "deployment": "broken"}); v < 1 {
		t.Errorf("kubedeploy_deployment_unavailable_pods of broken = %v, want its stuck pods", v)
	}
	t.Logf("the broken rollout waited on image pulls for %.0fs before its deadline", stuck)
}

// shadowAgrees waits until the running shadow check (observe at base) has decided on the final state of each
// of deployments in ns, settled (kubedeploy_shadow_deployment_state: converged, or divergent once it confirmed
// a divergence), and has seen the live controller break canary's partition; then it fails t for any
// divergence counted, or any surge or availability violation. Its decisions, not a wait, say that nothing
// found is still waiting for confirmation.
func shadowAgrees(t *testing.T, base, ns string, deployments ...string) {
	t.Helper()
	var undecided []string
	defer func() {
		if len(undecided) > 0 {
			t.Logf("the shadow check's last check of %v did not find it settled", undecided)
		}
	}()
	harness.Eventually(t, time.Minute, "the shadow check to decide on the settled Deployments", func(context.Context) (bool, error) {
		m := scrape(t, base)
		undecided = undecided[:0]
		for _, d := range deployments {
			state := func(s string) bool {
				return value(m, "kubedeploy_shadow_deployment_state", map[string]string{"namespace": ns, "deployment": d, "state": s}) == 1
			}
			if !state("converged") && !state("divergent") {
				undecided = append(undecided, d)
			}
		}
		return len(undecided) == 0 && value(m, "kubedeploy_shadow_bound_violations_total", map[string]string{"bound": "partition"}) >= 1, nil
	})
	m := scrape(t, base)
	t.Logf("shadow checks: %v settled, %v not", value(m, "kubedeploy_shadow_checks_total", map[string]string{"settled": "true"}),
		value(m, "kubedeploy_shadow_checks_total", map[string]string{"settled": "false"}))
	if n := sum(m, "kubedeploy_shadow_divergences_total"); n != 0 {
		t.Errorf("kubedeploy_shadow_divergences_total = %v, want 0 (see the shadow's log lines)", n)
	}
	for _, b := range []string{"surge", "availability"} {
		if v := value(m, "kubedeploy_shadow_bound_violations_total", map[string]string{"bound": b}); v != 0 {
			t.Errorf("kubedeploy_shadow_bound_violations_total{bound=%q} = %v, want 0", b, v)
		}
	}
}

// checkManagedFields fails t if any Deployment, ReplicaSet or pod of ns names observe's client as a manager.
func checkManagedFields(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	var metas []metav1.ObjectMeta
	ds, err := env.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		metas = append(metas, d.ObjectMeta)
	}
	rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range rss.Items {
		metas = append(metas, rs.ObjectMeta)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		metas = append(metas, p.ObjectMeta)
	}
	for _, m := range metas {
		for _, f := range m.ManagedFields {
			if strings.Contains(f.Manager, manager.ObserverName) {
				t.Errorf("%s names %s among its managers", m.Name, f.Manager)
			}
		}
	}
}

// shadowQuiet is the shadow check's confirmation time here: the embedded controllers act in milliseconds.
const shadowQuiet = time.Second

// sum returns the sum of family name's series, -1 when there is none.
func sum(families map[string]*dto.MetricFamily, name string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
	var total float64
	for _, m := range f.GetMetric() {
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// partitionedRollout creates Deployment canary (4 replicas) with kubedeploy.io/rollout-partition "2" (EX-1),
// which kube-controller-manager ignores, rolls it to a new image and waits for upstream to complete the
// rollout (past the partition). It returns the Deployment's name.
func partitionedRollout(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	d := harness.NewDeployment(ns, "canary", 4, "nginx:1.9")
	d.Annotations = map[string]string{"kubedeploy.io/rollout-partition": "2"}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "canary", 2*time.Minute)
	harness.SetImage(ctx, t, env.Client, ns, "canary", "canary", "nginx:1.9.3")
	harness.WaitComplete(t, env.Client, ns, "canary", 2*time.Minute)
	return "canary"
}

// autoRollbackIgnored is the shadow check's positive control: Deployment rollback, opted into EX-2
// (kubedeploy.io/rollback-on-progress-deadline, which kube-controller-manager ignores) with its last completed
// revision recorded, fails its rollout at the progress deadline and stays failed: a fixed point of upstream where kubedeploy would roll the template back.
// The running observe counts it, and observe --once names that Deployment alone, with the field and both
// values; canary (EX-1, completed past its partition: where kubedeploy holds too) is not named.
func autoRollbackIgnored(ctx context.Context, t *testing.T, base string, observer *rest.Config, ns, canary string) {
	t.Helper()
	d := harness.NewDeployment(ns, "rollback", 2, "nginx:1.9")
	// complete-revision is what kubedeploy's controller records when a rollout completes (EX-2's target); set
	// here as a cluster that ran kubedeploy before would have it, since upstream never writes it.
	d.Annotations = map[string]string{"kubedeploy.io/rollback-on-progress-deadline": "true", "kubedeploy.io/complete-revision": "1"}
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "rollback", 2*time.Minute)
	harness.SetImage(ctx, t, env.Client, ns, "rollback", "rollback", "nginx:broken")
	harness.Eventually(t, time.Minute, "the running shadow check to report the rollback kubedeploy would make", func(context.Context) (bool, error) {
		return value(scrape(t, base), "kubedeploy_shadow_divergences_total", map[string]string{"kind": "spec"}) >= 1, nil
	})
	r, err := manager.ObserveOnce(ctx, manager.Config{RESTConfig: observer, QPS: 20, Burst: 30, Version: "test", ShadowQuiet: shadowQuiet}, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("observe --once: %d Deployments checked, not settled %v", r.Checked, r.Unsettled)
	image := false
	for _, rep := range r.Divergent {
		for _, dv := range rep.Divergences {
			t.Logf("  %s: %s", rep.Deployment, dv)
			image = image || (strings.HasSuffix(dv.Field, ".image") && dv.Live == `"nginx:broken"` && dv.Kubedeploy == `"nginx:1.9"`)
		}
		if rep.Deployment.Name != "rollback" {
			t.Errorf("observe --once named %s, want only rollback (%s: where upstream left it, kubedeploy holds too)", rep.Deployment, canary)
		}
	}
	if len(r.Divergent) != 1 || !image || r.Checked < 4 {
		t.Errorf("observe --once: %d checked, %d divergent, image rollback named %v; want rollback alone, its image live nginx:broken, kubedeploy nginx:1.9",
			r.Checked, len(r.Divergent), image)
	}
}
