package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
)

// DefaultObservePort is observe mode's default plain-HTTP port for /healthz, /readyz, /livez and /metrics:
// one above DefaultSecurePort, so that both modes can run on one host.
const DefaultObservePort = 10261

// ObserverName names observe mode's client: its user agent is UserAgent(ObserverName, version).
const ObserverName = "observer"

// runObserving is observe mode (issue 25): the Deployment, ReplicaSet and pod informers (pods slimmed by
// podcache.Transform), the rollout metrics and kubedeploy_deployment_unavailable_pods fed from them, until ctx
// ends. It writes nothing to the API server: no Lease, no event, no status. syncCheck follows the caches.
func runObserving(ctx context.Context, cfg Config, syncCheck *informerSyncCheck) error {
	logger := klog.FromContext(ctx)
	client, err := cfg.clientFor(ObserverName)
	if err != nil {
		return err
	}
	resync := time.Duration(float64(minResyncPeriod) * (1 + rand.Float64()))
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(podcache.Transform))
	defer factory.Shutdown()
	caches := []cache.InformerSynced{
		factory.Apps().V1().Deployments().Informer().HasSynced,
		factory.Apps().V1().ReplicaSets().Informer().HasSynced,
		factory.Core().V1().Pods().Informer().HasSynced,
	}
	stopUnavailable := unavailablePods.use(sharedPodCaches(factory, logger))
	defer stopUnavailable()
	feeder, stopRollouts, err := startRolloutMetrics(ctx, factory)
	if err != nil {
		return err
	}
	defer stopRollouts()
	synced := func() bool {
		for _, s := range caches {
			if !s() {
				return false
			}
		}
		return true
	}
	syncCheck.set(synced)
	defer syncCheck.set(nil)
	factory.Start(ctx.Done())
	logger.Info("Observing Deployments, ReplicaSets and pods; writing nothing")
	go feeder.Run(ctx)
	if cache.WaitForCacheSync(ctx.Done(), synced) && cfg.Started != nil {
		cfg.Started()
	}
	<-ctx.Done()
	logger.Info("Stopped observing")
	return nil
}

// servePlain serves mux over plain HTTP, with no authentication or authorization, on s's listener or
// BindAddress:Port, and returns once it listens; it stops when ctx is done (in-flight requests get up to 5 s).
// It returns an error if the port cannot be bound.
func servePlain(ctx context.Context, s Serving, mux *http.ServeMux) error {
	ln, err := s.listen()
	if err != nil {
		return fmt.Errorf("listening on the metrics port: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 32 * time.Second}
	run(ctx, srv, func() error { return srv.Serve(ln) })
	klog.FromContext(ctx).Info("Serving health and metrics over plain HTTP", "address", ln.Addr().String())
	return nil
}

// healthAndMetrics is the mux of /healthz and /livez (live), /readyz (live and ready) and /metrics (the legacy
// registry).
func healthAndMetrics(live []healthz.HealthChecker, ready ...healthz.HealthChecker) *http.ServeMux {
	m := http.NewServeMux()
	healthz.InstallHandler(m, live...)
	healthz.InstallLivezHandler(m, live...)
	healthz.InstallReadyzHandler(m, append(append([]healthz.HealthChecker{}, live...), ready...)...)
	m.Handle("/metrics", legacyregistry.Handler())
	return m
}
