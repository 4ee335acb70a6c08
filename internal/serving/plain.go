package serving

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Plain serves health and metrics (HealthAndMetrics of live and ready) over plain HTTP, with no authentication
// or authorization, on s's listener or BindAddress:Port, and returns once it listens; it stops when ctx is done
// (in-flight requests get up to 5 s). It returns an error if the port cannot be bound.
func Plain(ctx context.Context, s Config, live []healthz.HealthChecker, ready ...healthz.HealthChecker) error {
	ln, err := s.listen()
	if err != nil {
		return fmt.Errorf("listening on the metrics port: %w", err)
	}
	mux := HealthAndMetrics(live, ready...)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 32 * time.Second}
	run(ctx, srv, func() error { return srv.Serve(ln) })
	klog.FromContext(ctx).Info("Serving health and metrics over plain HTTP", "address", ln.Addr().String())
	return nil
}

// HealthAndMetrics returns the mux of /healthz and /livez (the live checks), /readyz (live and ready) and
// /metrics (the legacy registry, k8s.io/component-base/metrics/legacyregistry).
func HealthAndMetrics(live []healthz.HealthChecker, ready ...healthz.HealthChecker) *http.ServeMux {
	m := http.NewServeMux()
	healthz.InstallHandler(m, live...)
	healthz.InstallLivezHandler(m, live...)
	healthz.InstallReadyzHandler(m, append(append([]healthz.HealthChecker{}, live...), ready...)...)
	m.Handle("/metrics", legacyregistry.Handler())
	return m
}
