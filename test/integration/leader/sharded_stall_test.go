package leader

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/testing/faultproxy"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// Issue 45 (SH-2): a write that started while its claim was valid and stalls never lands after the claim ended.
// A sharded replica (one bucket) reaches the API server through a fault proxy that holds every pod create in the
// workload namespace for 20 s, as a stalled connection would. Its requests do not hear the cancellation of the
// sync that sent them (deafToCancel), as in a process paused mid-request, so only the request's own deadline can
// end it. Its ReplicaSet controller's create is held; then the proxy fails the replica's Lease renewals, so its
// claim ends within RenewDeadline (2 s). The create carries the claim's end as its deadline (fencedTransport):
// the client gives it up then, the proxy never forwards it, and no pod exists after the hold would have ended.
// Without the deadline the create is forwarded when the hold ends and the pod is created.
func TestStalledWriteNeverLandsAfterItsClaim(t *testing.T) {
	ringNS, ns := env.Namespace(t), env.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	proxy, err := faultproxy.Start(ctx, env.Config, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	hold := faultproxy.Rule{Resource: "pods", Verb: "create", Namespace: ns, HoldFor: 20 * time.Second}
	proxy.SetRules(hold)
	runShardMember(t, "shard-stall", proxy.Config(), ringNS, 1, deafToCancel)
	harness.Eventually(t, time.Minute, "the replica to own the ring's bucket", func(ctx context.Context) (bool, error) {
		ring, err := ringOf(ctx, ringNS)
		return err == nil && len(ring.Buckets) == 1 && ring.Buckets[0].Owner == "shard-stall", nil
	})
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "web", 1, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "a pod create to be held by the proxy", func(context.Context) (bool, error) {
		return proxy.Stats().Held["create pods"] > 0, nil
	})
	heldAt := time.Now()
	proxy.SetRules(hold, faultproxy.Rule{Resource: "leases", Verb: "update", Namespace: ringNS, ErrorFraction: 1, Fault: faultproxy.InternalError})
	harness.Eventually(t, 30*time.Second, "the held create to be given up by its client", func(context.Context) (bool, error) {
		return proxy.Stats().Abandoned["create pods"] > 0, nil
	})
	t.Logf("the held create was given up %.1fs after it was held", time.Since(heldAt).Seconds())
	time.Sleep(time.Until(heldAt.Add(hold.HoldFor + 2*time.Second))) // past the end of every hold
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := proxy.Stats(); len(pods.Items) != 0 || s.Forwarded["create pods"] != 0 {
		t.Errorf("%d pods in %s, %d pod creates forwarded (held %v, abandoned %v); want none to land",
			len(pods.Items), ns, s.Forwarded["create pods"], s.Held, s.Abandoned)
	}
}

// deafToCancel sends each write with a context that keeps its deadline but not its cancellation: the sync that
// sent it ending (its set stopped, its bucket cut) does not reach the request, as when the process was paused
// with the request under way.
func deafToCancel(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet {
			return rt.RoundTrip(r) // reads and watches as they are
		}
		ctx := context.WithoutCancel(r.Context())
		if d, ok := r.Context().Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		}
		resp, err := rt.RoundTrip(r.WithContext(ctx))
		if err == nil {
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			err = readErr
		}
		return resp, err
	})
}
