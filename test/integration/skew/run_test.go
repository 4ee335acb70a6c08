package skew

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// futureRun is one test's kubedeploy controllers running behind a futureServer until the test ends, the test's
// namespace, its 5-minute context, and a dynamic client through the same server (dyn, and deployments: the
// namespace's Deployments).
type futureRun struct {
	fs          *futureServer
	ns          string
	ctx         context.Context
	dyn         dynamic.Interface
	deployments dynamic.ResourceInterface
}

// startFutureRun starts the futureServer and the controllers behind it (stopped when t ends, an error stopping
// them failing t) and returns the run; it skips t when the control plane is not there (harness.Skip).
func startFutureRun(t *testing.T) futureRun {
	t.Helper()
	harness.Skip(t, env)
	fs := newFutureServer(t)
	stop := env.RunControllers(manager.Config{RESTConfig: fs.restConfig()})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	r := futureRun{fs: fs, ns: env.Namespace(t), ctx: harness.Context(t, 5*time.Minute)}
	dyn, err := dynamic.NewForConfig(fs.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.dyn, r.deployments = dyn, dyn.Resource(rawtemplate.Deployments).Namespace(r.ns)
	return r
}
