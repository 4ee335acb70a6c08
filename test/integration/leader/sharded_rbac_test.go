package leader

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// forbiddenLog records every request the API server answered 403 Forbidden for want of a permission: a 403 for
// a namespace being deleted (an earlier test's, whose Deployments the replicas still sync) is no RBAC denial.
type forbiddenLog struct {
	mu   sync.Mutex
	seen []string
}

func (f *forbiddenLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte("NamespaceTerminating")) || bytes.Contains(body, []byte("is being terminated")) {
				return resp, err
			}
			f.mu.Lock()
			f.seen = append(f.seen, r.Method+" "+r.URL.String())
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbiddenLog) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// startRBACShardMember runs a sharded manager (both controllers, 4 buckets) as identity on rc, its Lease and the
// ring in deploy/sharded's namespace (deploy.Namespace, the ring's default name, as its Role names them), until
// the test ends.
func startRBACShardMember(t *testing.T, identity string, rc *rest.Config, forbidden *forbiddenLog) *member {
	t.Helper()
	return runShardMember(t, identity, rc, deploy.Namespace, 4, forbidden.wrap)
}

// resetShardRing deletes the ring and the replicas' Leases in deploy.Namespace, so the test starts with none.
func resetShardRing(ctx context.Context, t *testing.T) {
	t.Helper()
	err := env.Client.CoreV1().ConfigMaps(deploy.Namespace).Delete(ctx, shard.DefaultRingName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err = env.Client.CoordinationV1().Leases(deploy.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: labels.Set{shard.MemberLabel: shard.DefaultRingName}.String()})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShardedRBACIsSufficient (issue 35): as the deploy/ ServiceAccount's user, bound only to the roles of deploy/
// and deploy/sharded, two sharded replicas create the ring, split it between them (SH-5), and roll Deployments to
// completion; the API server forbids none of their requests, and forbids what deploy/sharded must not grant.
func TestShardedRBACIsSufficient(t *testing.T) {
	harness.Skip(t, env)
	ctx := harness.Context(t, 5*time.Minute)
	if err := deploy.ApplyIdentity(ctx, env.Client); err != nil {
		t.Fatalf("applying deploy/ RBAC: %v", err)
	}
	if err := deploy.ApplyShardedIdentity(ctx, env.Client); err != nil {
		t.Fatalf("applying deploy/sharded RBAC: %v", err)
	}
	rc, err := env.ControlPlane.ClientConfig(deploy.User)
	if err != nil {
		t.Fatal(err)
	}
	resetShardRing(ctx, t)
	namespaces := make([]string, 4)
	for i := range namespaces {
		namespaces[i] = env.Namespace(t)
		if _, err := env.Client.AppsV1().Deployments(namespaces[i]).Create(ctx, harness.NewDeployment(namespaces[i], "web", 3, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	forbidden := &forbiddenLog{}
	t.Cleanup(func() { // runs after the members' own cleanups have stopped them
		if seen := forbidden.requests(); len(seen) > 0 {
			t.Errorf("the API server forbade %d requests of the sharded replicas, first %v", len(seen), seen[:min(5, len(seen))])
		}
	})
	ids := []string{"rbac-shard-a", "rbac-shard-b"}
	for _, id := range ids {
		startRBACShardMember(t, id, rc, forbidden)
	}
	waitRingSpread(t, deploy.Namespace, ids)
	for _, ns := range namespaces {
		harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	}
	for _, ns := range namespaces {
		harness.SetImage(ctx, t, env.Client, ns, "web", "web", "nginx:1.10")
	}
	for _, ns := range namespaces {
		d := harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
		if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
			t.Errorf("%s/web revision = %q, want 2", ns, got)
		}
	}
	checkShardedForbidden(ctx, t, kubernetes.NewForConfigOrDie(rc))
}

// checkShardedForbidden: deploy/sharded grants no write or list of a ConfigMap but the ring, no Lease outside its
// namespace, and no read of a namespace object.
func checkShardedForbidden(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	other := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-the-ring", Namespace: deploy.Namespace}}
	if _, err := env.Client.CoreV1().ConfigMaps(deploy.Namespace).Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for what, do := range map[string]func() error{
		// Reading one by name is the Deployment controller's (deploy/'s configmaps get, for EX-6's analysis
		// templates in any Deployment's namespace); writing is not.
		"update another ConfigMap of " + deploy.Namespace: func() error {
			_, err := client.CoreV1().ConfigMaps(deploy.Namespace).Update(ctx, other, metav1.UpdateOptions{})
			return err
		},
		"list the ConfigMaps of " + deploy.Namespace: func() error {
			_, err := client.CoreV1().ConfigMaps(deploy.Namespace).List(ctx, metav1.ListOptions{})
			return err
		},
		"delete a Lease of kube-system": func() error {
			return client.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(ctx, "kube-scheduler", metav1.DeleteOptions{})
		},
		"read a Namespace": func() error {
			_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
			return err
		},
	} {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}
	ring, err := client.CoreV1().ConfigMaps(deploy.Namespace).Get(ctx, shard.DefaultRingName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ring, read as the replicas: %v", err)
	}
	if _, err := shard.DecodeRing(ring); err != nil {
		t.Error(fmt.Errorf("the ring the replicas made: %w", err))
	}
}
