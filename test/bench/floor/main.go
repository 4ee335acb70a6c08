// Command floor is the bench's floor side (test/bench -mode shards, issue 35): the informers `kubedeploy
// controllers` runs, built as the manager builds them, and nothing else. Pods, ReplicaSets, Deployments and nodes
// are listed and watched in every namespace through a protobuf client, pods and nodes slimmed by
// podcache.Transform, Deployments and ReplicaSets through rawtemplate's checked informers; no controller, no
// queue, no write. What it costs per event is the least any controller reading those caches pays.
//
// It is built and run by the bench only (it is not part of the product's CLI). It serves, in plain HTTP on
// 127.0.0.1:--port, /metrics (a few lines of Prometheus text: the live heap, the cached objects, the informer
// notifications received), /readyz (200 once every cache has synced) and Go's /debug/pprof/.
//
//	floor --kubeconfig=/tmp/kd/kubeconfig --port=10300
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/cli/controllerscmd"
	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	port := flag.Int("port", 10300, "port of /metrics, /readyz and /debug/pprof/ on 127.0.0.1 (plain HTTP)")
	gcPercent := flag.Int("gc-percent", controllerscmd.GCPercent, "Go GC target, as the controllers' --gc-percent (the bench passes theirs); GOGC, if set, wins")
	flag.Parse()
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(*gcPercent) // as the controllers run
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *port); err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}

// floor is the running informers and what they have delivered.
type floor struct {
	factory informers.SharedInformerFactory
	synced  []cache.InformerSynced
	pods    cache.SharedIndexInformer
	// events counts the informer notifications (add, update, delete) by resource.
	events map[string]*atomic.Int64
}

// run builds the informers, starts them, serves until ctx ends and stops them.
func run(ctx context.Context, kubeconfig string, port int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	f, err := newFloor(ctx, cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Handler: f.mux(), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- srv.ListenAndServe() }()
	f.factory.Start(ctx.Done())
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	_ = srv.Close()
	f.factory.Shutdown()
	return err
}

// newFloor builds the shared informer factory as manager.newSharedInformers does for an unsharded replica
// (protobuf, pods through podcache.NewClient and podcache.Transform, rawtemplate's checked Deployment and
// ReplicaSet informers), at the bench's lifted
// client rate limit, and asks it for the four informers the Deployment and ReplicaSet controllers read.
func newFloor(ctx context.Context, cfg *rest.Config) (*floor, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent, cfg.QPS, cfg.Burst = "kubedeploy-bench-floor", 5000, 10000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	podClient, err := podcache.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 12*time.Hour, informers.WithTransform(podcache.Transform))
	factory.InformerFor(&v1.Pod{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return corev1informers.NewPodInformer(podClient, metav1.NamespaceAll, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
	if err := rawtemplate.NewStore(klog.FromContext(ctx), dyn).Informers(factory, cfg, nil); err != nil {
		return nil, err
	}
	f := &floor{factory: factory, events: map[string]*atomic.Int64{}}
	for name, inf := range map[string]cache.SharedIndexInformer{
		"pods":        factory.Core().V1().Pods().Informer(),
		"nodes":       factory.Core().V1().Nodes().Informer(),
		"deployments": factory.InformerFor(&appsv1.Deployment{}, nil),
		"replicasets": factory.InformerFor(&appsv1.ReplicaSet{}, nil),
	} {
		n := &atomic.Int64{}
		f.events[name] = n
		count := func(any) { n.Add(1) }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: count, DeleteFunc: count, UpdateFunc: func(_, obj any) { count(obj) },
		}); err != nil {
			return nil, err
		}
		f.synced = append(f.synced, inf.HasSynced)
	}
	f.pods = factory.Core().V1().Pods().Informer()
	return f, nil
}

// mux serves /metrics, /readyz and /debug/pprof/.
func (f *floor) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		for _, s := range f.synced {
			if !s() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	m.HandleFunc("/metrics", f.metrics)
	return m
}

// metrics writes the heap in bytes (allocated now, and live as of the last GC, under the Go collector's names),
// the cached pods and the namespaces they are in, and the notifications received by resource, in Prometheus text
// format.
func (f *floor) metrics(w http.ResponseWriter, _ *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	namespaces := map[string]bool{}
	pods := f.pods.GetStore().List()
	for _, obj := range pods {
		if p, ok := obj.(*v1.Pod); ok {
			namespaces[p.Namespace] = true
		}
	}
	fmt.Fprintf(w, "go_memstats_heap_alloc_bytes %d\n", ms.HeapAlloc)
	fmt.Fprintf(w, "go_gc_heap_live_bytes %d\n", live[0].Value.Uint64())
	fmt.Fprintf(w, "kubedeploy_bench_floor_cached_pods %d\n", len(pods))
	fmt.Fprintf(w, "kubedeploy_bench_floor_cached_namespaces %d\n", len(namespaces))
	for name, n := range f.events {
		fmt.Fprintf(w, "kubedeploy_bench_floor_events_total{resource=%q} %d\n", name, n.Load())
	}
}
