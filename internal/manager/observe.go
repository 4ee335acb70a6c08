package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/rolloutmetrics"
	"github.com/kubedeploy/kubedeploy/internal/serving"
	"github.com/kubedeploy/kubedeploy/internal/shadow"
)

// DefaultObservePort is observe mode's default plain-HTTP port for /healthz, /readyz, /livez and /metrics:
// one above DefaultSecurePort, so that both modes can run on one host.
const DefaultObservePort = 10261

// ObserverName names observe mode's client: its user agent is UserAgent(ObserverName, version).
const ObserverName = "observer"

// runObserving is observe mode (issue 25): the Deployment, ReplicaSet and pod informers (pods slimmed by
// podcache.Transform), the rollout metrics and kubedeploy_deployment_unavailable_pods fed from them, and the
// shadow check (internal/shadow), until ctx ends. It writes nothing to the API server: no Lease, no event, no
// status; the shadow syncs' writes are recorded, never sent. syncCheck follows the caches.
func runObserving(ctx context.Context, cfg Config, syncCheck *serving.SyncCheck) error {
	logger := klog.FromContext(ctx)
	factory, templates, err := observerInformers(ctx, cfg, metav1.NamespaceAll)
	if err != nil {
		return err
	}
	defer factory.Shutdown()
	caches := []cache.InformerSynced{
		factory.Apps().V1().Deployments().Informer().HasSynced,
		factory.Apps().V1().ReplicaSets().Informer().HasSynced,
		factory.Core().V1().Pods().Informer().HasSynced,
	}
	stopUnavailable := rolloutmetrics.UseUnavailablePods(factory, logger)
	defer stopUnavailable()
	feeder, stopRollouts, err := rolloutmetrics.FeedFromInformers(ctx, factory)
	if err != nil {
		return err
	}
	defer stopRollouts()
	watcher, err := startShadow(cfg, shadowSources(factory, templates), logger)
	if err != nil {
		return err
	}
	synced := func() bool {
		for _, s := range caches {
			if !s() {
				return false
			}
		}
		return true
	}
	syncCheck.Set(synced)
	defer syncCheck.Set(nil)
	factory.Start(ctx.Done())
	logger.Info("Observing Deployments, ReplicaSets and pods; writing nothing")
	go feeder.Run(ctx)
	go watcher.Run(ctx)
	if cache.WaitForCacheSync(ctx.Done(), synced) && cfg.Started != nil {
		cfg.Started()
	}
	<-ctx.Done()
	logger.Info("Stopped observing")
	return nil
}

// observerInformers returns observe mode's informer factory (namespace "" for all) with pods decoded partially
// (podcache.NewClient) and slimmed by podcache.Transform, and the rawtemplate store its Deployment and ReplicaSet informers fill (IM-8: they are
// rawtemplate's, protobuf, as the controllers' own, so the shadow check's syncs see the templates as stored and
// name ReplicaSets as the controllers do). Its errors are the clients' and the informers'.
func observerInformers(ctx context.Context, cfg Config, namespace string) (informers.SharedInformerFactory, *rawtemplate.Store, error) {
	client, dyn, infConfig, err := cfg.clientsFor(ObserverName, true)
	if err != nil {
		return nil, nil, err
	}
	resync := time.Duration(float64(minResyncPeriod) * (1 + rand.Float64()))
	podClient, err := podcache.NewClient(infConfig)
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithTransform(podcache.Transform), informers.WithNamespace(namespace))
	factory.InformerFor(&v1.Pod{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(podListWatch(podClient, namespace), &v1.Pod{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
	templates := rawtemplate.NewStore(klog.FromContext(ctx), dyn)
	if err := templates.InformersIn(factory, infConfig, namespace); err != nil {
		factory.Shutdown()
		return nil, nil, err
	}
	return factory, templates, nil
}

// shadowSources are factory's informers, and the store they fill, as the shadow check reads them.
func shadowSources(factory informers.SharedInformerFactory, templates *rawtemplate.Store) shadow.Sources {
	return shadow.Sources{
		Deployments: factory.Apps().V1().Deployments(),
		ReplicaSets: factory.Apps().V1().ReplicaSets(),
		Pods:        factory.Core().V1().Pods(),
		Templates:   templates,
	}
}

// startShadow builds the shadow check over src (informers not started yet), its findings counted in
// kubedeploy_shadow_divergences_total and kubedeploy_shadow_bound_violations_total and logged; run the
// returned Watcher. It returns the checker's configuration error.
func startShadow(cfg Config, src shadow.Sources, logger klog.Logger) (*shadow.Watcher, error) {
	shadow.Register()
	checker, err := shadow.NewChecker(cfg.restConfigFor(ObserverName), src, nil)
	if err != nil {
		return nil, err
	}
	w, err := shadow.NewWatcher(checker, src, nil, cfg.ShadowQuiet)
	if err != nil {
		return nil, err
	}
	shadow.Publish(w, logger.WithName("shadow"))
	return w, nil
}

// OnceReport is what ObserveOnce found.
type OnceReport struct {
	// Checked is how many Deployments were checked; Divergent those kubedeploy would write to, with what;
	// Unsettled those not settled (rollouts in progress), "namespace/name: why".
	Checked   int
	Divergent []shadow.Report
	Unsettled []string
	// Rollouts are the Deployments whose rollout is not complete, "namespace/name: verdict" (Checker.Verdicts).
	Rollouts []string
}

// ObserveOnce is `observe --once` (issue 25): it lists the Deployments of namespace ("" for all), their
// ReplicaSets and pods with observe mode's read-only client, runs the shadow check on each (Checker.Once,
// with cfg.ShadowQuiet) and returns what it found. It writes nothing. cfg needs RESTConfig, QPS, Burst and
// Version. It returns an error when the caches do not sync before ctx ends, or a check's.
func ObserveOnce(ctx context.Context, cfg Config, namespace string) (OnceReport, error) {
	factory, templates, err := observerInformers(ctx, cfg, namespace)
	if err != nil {
		return OnceReport{}, err
	}
	defer factory.Shutdown()
	checker, err := shadow.NewChecker(cfg.restConfigFor(ObserverName), shadowSources(factory, templates), nil)
	if err != nil {
		return OnceReport{}, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(sctx.Done())
	for typ, ok := range factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			return OnceReport{}, fmt.Errorf("the %v cache did not sync: %w", typ, context.Cause(ctx))
		}
	}
	var r OnceReport
	r.Divergent, r.Unsettled, r.Checked, err = checker.Once(ctx, namespace, cfg.ShadowQuiet)
	if err != nil {
		return r, err
	}
	r.Rollouts, err = checker.Verdicts(namespace)
	return r, err
}
