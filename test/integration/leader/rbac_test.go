package leader

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// tokenConfig returns a client configuration authenticating with a fresh
// bound token (TokenRequest) of ServiceAccount ns/name, as a pod would.
func tokenConfig(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, name, err)
	}
	return &rest.Config{
		Host:            env.Config.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData, CAFile: env.Config.CAFile},
	}
}

// TestDeployRolesAreSufficient: with only a token of the deploy/
// ServiceAccount, bound only to the deploy/ roles, the controllers run a
// full rollout (create, rolling update, scale down, history) and the writes
// they do not need are Forbidden.
func TestDeployRolesAreSufficient(t *testing.T) {
	harness.Skip(t, env)
	ns := env.Namespace(t)
	resetLease(t)
	identityConfig(t) // applies deploy/ RBAC
	rc := tokenConfig(t, deploy.Namespace, deploy.ServiceAccount)
	m := startMember(t, "token-member", rc, shortLease, manager.Serving{})
	waitHolder(t, "token-member", 30*time.Second)

	ctx := harness.Context(t, 3*time.Minute)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "web", 10, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "web", 90*time.Second)
	w := harness.WatchRollout(t, env.Client, ns, "web", harness.Bounds{MaxTotal: 13, MinAvailable: 8})
	setImage(ctx, t, ns, "web", "nginx:1.9.3")
	d := harness.WaitComplete(t, env.Client, ns, "web", 90*time.Second)
	w.Stop()
	w.Check(4)
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
		t.Errorf("revision = %q, want 2", got)
	}
	if m.link.writes.Load() == 0 {
		t.Fatal("the token member made no writes")
	}

	client := kubernetes.NewForConfigOrDie(rc)
	forbidden := forbiddenCalls(ctx, t, ns, client)
	for what, do := range forbidden {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}
}

// forbiddenCalls are calls the deploy/ roles must not allow, by what they
// do, made with client (authenticated as the deploy/ ServiceAccount) in ns;
// each returns the API server's answer.
func forbiddenCalls(ctx context.Context, t *testing.T, ns string, client kubernetes.Interface) map[string]func() error {
	t.Helper()
	return map[string]func() error{
		"create a Secret": func() error {
			_, err := client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
			return err
		},
		"delete a Node": func() error {
			return client.CoreV1().Nodes().Delete(ctx, controlplane.NodeNamePrefix+"0", metav1.DeleteOptions{})
		},
		"create a Deployment": func() error {
			_, err := client.AppsV1().Deployments(ns).Create(ctx, harness.NewDeployment(ns, "x", 1, "nginx"), metav1.CreateOptions{})
			return err
		},
		"delete a Deployment": func() error {
			return client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		},
		"update a Pod": func() error {
			pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("listing pods: %v (%d)", err, len(pods.Items))
			}
			_, err = client.CoreV1().Pods(ns).Update(ctx, &pods.Items[0], metav1.UpdateOptions{})
			return err
		},
		"read a Secret": func() error {
			_, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
	}
}
