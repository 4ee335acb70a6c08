// Package leader runs kubedeploy controller managers in-process against one
// embedded control plane that runs no controllers of its own, to check what
// `kubedeploy controllers` promises: one leader at a time, takeover after a
// crash or a graceful stop, the deploy/ roles being enough (and no more), and
// the health and metrics endpoints.
package leader

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	// An empty, non-nil list: the harness runs no controllers; the tests start their own managers.
	code := harness.Main(m, harness.Options{Controllers: []string{}, PodStartupDelay: time.Second}, &env)
	os.Exit(code)
}

// link wraps a manager's connection to the API server: it counts the writes
// the manager makes outside leader election, and can be cut, after which every
// request fails at once, as if the process had been killed (kill -9): it can
// neither act nor renew nor release its Lease.
type link struct {
	cut    atomic.Bool
	writes atomic.Int64
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (l *link) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if l.cut.Load() {
			return nil, errors.New("connection cut by the test (simulated kill -9)")
		}
		if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/leases") {
			l.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

// member is one in-process controller manager, standing in for one `kubedeploy controllers` process.
type member struct {
	identity string
	link     *link
	cancel   context.CancelFunc
	done     chan error
}

// shortLease makes a crashed leader's Lease expire quickly. The retry period
// is a whole second: client-go's standby restarts its expiry clock only when
// the Lease record it reads changes, and the record holds renewTime to the
// second, so with a sub-second retry period two renewals can fall in one
// second and the standby may take over up to a second before the last one
// expires (CI saw it take over 2.7s after a renewal of a 3s lease, with 0.5s).
// lease-duration > renew-deadline + retry-period keeps a cut-off leader's
// giving up before a standby's taking over.
var shortLease = manager.LeaderElection{Enabled: true, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}

// identityConfig returns a client configuration for the deploy/ ServiceAccount's
// user (a client certificate from the cluster CA, no groups), after applying deploy/'s RBAC.
func identityConfig(t *testing.T) *rest.Config {
	t.Helper()
	if err := deploy.ApplyIdentity(context.Background(), env.Client); err != nil {
		t.Fatalf("applying deploy/ RBAC: %v", err)
	}
	cfg, err := env.ControlPlane.ClientConfig(deploy.User)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startMember runs a manager with both controllers as identity, on rc, until
// the test ends (or stop/crash is called).
func startMember(t *testing.T, identity string, rc *rest.Config, le manager.LeaderElection, serving manager.Serving) *member {
	t.Helper()
	m := &member{identity: identity, link: &link{}, done: make(chan error, 1)}
	rc = rest.CopyConfig(rc)
	rc.Wrap(m.link.wrap)
	le.Identity = identity
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName(identity)))
	m.cancel = cancel
	go func() {
		m.done <- manager.Run(ctx, manager.Config{
			RESTConfig: rc, Controllers: manager.KnownControllers, Version: "test",
			LeaderElection: le, Serving: serving,
		})
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop cancels the member's context (SIGTERM) and returns Run's result.
func (m *member) stop(t *testing.T) error {
	t.Helper()
	m.cancel()
	select {
	case err := <-m.done:
		m.done <- err // for a later call
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("manager %s did not stop within 60s after cancel", m.identity)
		return nil
	}
}

// crash cuts the member off the API server and then stops it: no lease release gets through.
func (m *member) crash(t *testing.T) {
	t.Helper()
	m.link.cut.Store(true)
	_ = m.stop(t)
}

// resetLease deletes the Lease left by an earlier test, so each test starts with no leader.
func resetLease(t *testing.T) {
	t.Helper()
	err := env.Client.CoordinationV1().Leases(manager.DefaultResourceNamespace).Delete(context.Background(), manager.DefaultResourceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting the Lease: %v", err)
	}
}

// holder returns the Lease's holder identity ("" when none or no Lease).
func holder(ctx context.Context) (string, error) {
	l, err := env.Client.CoordinationV1().Leases(manager.DefaultResourceNamespace).Get(ctx, manager.DefaultResourceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", err
	}
	return *l.Spec.HolderIdentity, nil
}

// waitHolder waits up to timeout for the Lease to be held by identity and returns how long that took.
func waitHolder(t *testing.T, identity string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	harness.Eventually(t, timeout, "Lease held by "+identity, func(ctx context.Context) (bool, error) {
		h, err := holder(ctx)
		return h == identity, err
	})
	return time.Since(start)
}
