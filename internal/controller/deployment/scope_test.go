package deployment

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
	"github.com/kubedeploy/kubedeploy/internal/testing/controllertest"
)

// TestScopeForgetsThenEnqueues: with a Scope (sharded mode, SH-3, SH-9) the controller enqueues only admitted
// namespaces' keys; admitting a bucket forgets the read-your-writes records of its namespaces, then enqueues
// each of their cached Deployments once, and nothing of another bucket.
func TestScopeForgetsThenEnqueues(t *testing.T) {
	f := controllertest.New(t, baseTime)
	scope := runner.NewScope()
	c, err := New(f.Ctx, Config{
		Client: apiclient.New(f.Client, nil), Recorder: f.Recorder, Clock: f.Clock, Scope: scope,
		Deployments: f.Factory.Apps().V1().Deployments(), ReplicaSets: f.Factory.Apps().V1().ReplicaSets(),
		Pods: f.Factory.Core().V1().Pods(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a-1", "a-2", "b-1"} {
		d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
		d.Namespace = ns
		f.AddToCache(d)
		c.freshness.Written(ns+"/nginx", resourceDeployments, &metav1.ObjectMeta{ResourceVersion: "1000"})
	}
	c.runner.Enqueue(cache.ObjectName{Namespace: "a-1", Name: "nginx"})
	if n := c.runner.Len(); n != 0 {
		t.Fatalf("%d keys queued before any namespace was admitted", n)
	}
	scope.Admit(1, func(ns string) bool { return strings.HasPrefix(ns, "a-") })
	for key, want := range map[string]bool{"a-1/nginx": false, "a-2/nginx": false, "b-1/nginx": true} {
		if got := c.freshness.Pending(key); got != want {
			t.Errorf("read-your-writes record of %s kept = %v, want %v", key, got, want)
		}
	}
	if n := c.runner.Len(); n != 2 {
		t.Errorf("%d keys queued after admitting a-*, want its 2 Deployments", n)
	}
}
