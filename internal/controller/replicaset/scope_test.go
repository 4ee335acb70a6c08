package replicaset

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// TestScopeForgetsThenEnqueues: with a Scope (sharded mode, SH-3, SH-9) the controller enqueues only admitted
// namespaces' keys; admitting a bucket forgets the expectations left of its namespaces, then enqueues each of
// their cached ReplicaSets once, and nothing of another bucket.
func TestScopeForgetsThenEnqueues(t *testing.T) {
	scope := runner.NewScope()
	f := newFixtureWith(t, func(_ *fixture, c *Config) { c.Scope = scope })
	for _, ns := range []string{"a-1", "a-2", "b-1"} {
		rs := testRS(1)
		rs.Namespace = ns
		f.AddToCache(rs)
		f.c.expectations.ExpectCreations(klog.FromContext(f.Ctx), ns+"/rs", 1)
	}
	f.c.runner.Enqueue(cache.ObjectName{Namespace: "a-1", Name: "rs"})
	if n := f.c.runner.Len(); n != 0 {
		t.Fatalf("%d keys queued before any namespace was admitted", n)
	}
	scope.Admit(1, func(ns string) bool { return strings.HasPrefix(ns, "a-") })
	for key, want := range map[string]bool{"a-1/rs": false, "a-2/rs": false, "b-1/rs": true} {
		if _, _, exists := f.c.expectations.Pending(key); exists != want {
			t.Errorf("expectations of %s kept = %v, want %v", key, exists, want)
		}
	}
	if n := f.c.runner.Len(); n != 2 {
		t.Errorf("%d keys queued after admitting a-*, want its 2 ReplicaSets", n)
	}
}
