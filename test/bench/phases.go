package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// result is one phase of one side at one rate limit in one repetition.
type result struct {
	Side, QPS, Phase string
	Run              int
	Seconds          float64
	CPUSeconds       float64
	PeakRSSMB        float64
	// RSSMB is the controllers' VmRSS settleFor after the phase converged; IdleRSSMB the same after the
	// warm-up, before the first phase, with no pods in the namespace.
	RSSMB, IdleRSSMB float64
	// Pods is how many pods the namespace holds once the phase has converged.
	Pods int
	// BoundWrites is how many pod creates and deletes the phase needs at least.
	BoundWrites int
	traffic
	// ScaleDowns and ScaleUps count the times a ReplicaSet's spec.replicas went down or up.
	ScaleDowns, ScaleUps int
	// ClusterCPUSeconds is the CPU time of the whole `kubedeploy up` process (API server, etcd, scheduler,
	// generic controllers, KWOK) during the phase.
	ClusterCPUSeconds float64
	// Queues are the controllers' workqueue figures for the phase.
	Queues queueStats
}

// phase is one step of the scenario: a change to the Deployment and the replicas it must then reach.
type phase struct {
	name string
	// patch is a strategic merge patch for the Deployment, "" to create it.
	patch string
	// replicas is the size the Deployment must reach; bound the pod writes it needs at least (n = -replicas).
	replicas, bound func(n int) int
}

// phases is the scenario every side runs, in order.
var phases = []phase{
	{name: "create", replicas: func(n int) int { return n }, bound: func(n int) int { return n }},
	{name: "rolling", patch: `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.9.3"}]}}}}`,
		replicas: func(n int) int { return n }, bound: func(n int) int { return 2 * n }},
	{name: "scale-down", patch: `{"spec":{"replicas":%d}}`,
		replicas: func(n int) int { return n / 10 }, bound: func(n int) int { return n - n/10 }},
	{name: "scale-up", patch: `{"spec":{"replicas":%d}}`,
		replicas: func(n int) int { return n }, bound: func(n int) int { return n - n/10 }},
	{name: "recreate", patch: `{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null},"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.10"}]}}}}`,
		replicas: func(n int) int { return n }, bound: func(n int) int { return 2 * n }},
}

// step is one measured phase of a scenario, named as the table names it.
type step struct {
	name string
	run  func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error)
}

// scenario returns the steps of o's mode, in order: the single-Deployment phases, or the many-Deployments ones.
func (o options) scenario() []step {
	if o.mode == modeMany {
		return manySteps(o)
	}
	var out []step
	for _, ph := range phases {
		out = append(out, step{name: ph.name, run: func(ctx context.Context, cl *cluster, ns string, p *process, o options) (result, error) {
			return runPhase(ctx, cl, ns, p, ph, o)
		}})
	}
	return out
}

// measure runs side's controllers at rate limit q through every phase in a namespace of their own and returns
// one result per phase. It stops the controllers and deletes the namespace before it returns.
func measure(ctx context.Context, cl *cluster, bins binaries, side string, q rateLimit, run int, o options) ([]result, error) {
	ns := fmt.Sprintf("%s-%s-%d", side, q.Name, run)
	if err := createNamespace(ctx, cl.client, ns); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if side == sideObserve {
		live, err := startLive(cl, bins, q, ns)
		if err != nil {
			return nil, err
		}
		defer live.stop()
	}
	name, args := controllerArgs(bins, side, cl.kubeconfig, q, port)
	p, err := startProcess(name, args, filepath.Join(filepath.Dir(cl.dir), ns+".log"), bins.env...)
	if err != nil {
		return nil, err
	}
	p.port, p.plain, p.noPprof = port, side == sideObserve, side == sideObserve
	if o.profile {
		if err := p.profileInto(filepath.Join(filepath.Dir(cl.dir), ns+"-pprof")); err != nil {
			return nil, err
		}
	}
	var results []result
	err = func() error {
		defer p.stop()
		if err := warmUp(ctx, cl.client, ns, p, o.phaseTimeout); err != nil {
			return err
		}
		idle, err := p.settledRSS(ctx)
		if err != nil {
			return err
		}
		for _, ph := range o.scenario() {
			r, err := ph.run(ctx, cl, ns, p, o)
			if err != nil {
				return fmt.Errorf("%s: %w", ph.name, err)
			}
			r.Side, r.QPS, r.Run, r.IdleRSSMB = side, q.Name, run, float64(idle)/1024
			logf("run %d %-10s %-7s %-12s %6.1fs  %5.2f CPU-s (cluster %5.2f)  %4.0f MB (settled %4.0f)  writes %v  409s %v  scale-downs %d  syncs %d  delayed adds %d  sync p99 %.0fms",
				run, side, q.Name, ph.name, r.Seconds, r.CPUSeconds, r.ClusterCPUSeconds, r.PeakRSSMB, r.RSSMB, sum(r.Writes), sum(r.Conflicts),
				r.ScaleDowns, r.Queues.Syncs, r.Queues.Retries, r.Queues.SyncP99*1000)
			results = append(results, r)
		}
		return nil
	}()
	if delErr := deleteNamespace(ctx, cl.client, ns, o.phaseTimeout); err == nil {
		err = delErr
	}
	return results, err
}

// startLive starts, for the observe side, the controllers that run its rollouts: upstream's, at rate limit q,
// not measured, their log in <ns>-live.log.
func startLive(cl *cluster, bins binaries, q rateLimit, ns string) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name, args := controllerArgs(bins, sideUpstream, cl.kubeconfig, q, port)
	return startProcess(name, args, filepath.Join(filepath.Dir(cl.dir), ns+"-live.log"))
}

// warmUp waits until the controllers act: a 1-replica Deployment becomes available; then it deletes it and
// waits for its pods to be gone, so the first phase starts with synced caches and an empty namespace.
func warmUp(ctx context.Context, client kubernetes.Interface, ns string, p *process, timeout time.Duration) error {
	d := deployment(ns, "warmup", 1)
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitReplicas(ctx, client, ns, "warmup", 1, p, timeout); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	bg := metav1.DeletePropagationForeground
	if err := client.AppsV1().Deployments(ns).Delete(ctx, "warmup", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// runPhase applies ph to the "bench" Deployment in ns and measures until the Deployment reaches its size.
func runPhase(ctx context.Context, cl *cluster, ns string, p *process, ph phase, o options) (result, error) {
	n := o.replicas
	act := func() error {
		if ph.patch == "" {
			_, err := cl.client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "bench", int32(n)), metav1.CreateOptions{})
			return err
		}
		patch := ph.patch
		if ph.name == "scale-down" || ph.name == "scale-up" {
			patch = fmt.Sprintf(patch, ph.replicas(n))
		}
		_, err := cl.client.AppsV1().Deployments(ns).Patch(ctx, "bench", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	done := func() error {
		return waitReplicas(ctx, cl.client, ns, "bench", int32(ph.replicas(n)), p, o.phaseTimeout)
	}
	r, err := observe(ctx, cl, ns, ph.name, p, act, done)
	r.Phase, r.BoundWrites, r.Pods = ph.name, ph.bound(n), ph.replicas(n)
	return r, err
}

// observe measures one phase: it calls act (the bench's change), then done (which returns once the controllers
// have converged), and returns the wall time from act's start to done's return and what the controllers and the
// cluster spent meanwhile. After done it waits settleFor and reads the controllers' RSS once more (RSSMB). With
// -profile it also saves a CPU profile of the phase's first profileFor (and waits for it before it returns). The
// caller fills in Phase, BoundWrites and Pods.
func observe(ctx context.Context, cl *cluster, ns, phaseName string, p *process, act, done func() error) (result, error) {
	scales, stopScales, err := watchScales(ctx, cl.client, ns)
	if err != nil {
		return result{}, err
	}
	defer stopScales()
	before, err := readTraffic(ctx, cl, p)
	if err != nil {
		return result{}, err
	}
	cpuBefore, err := readCPU(cl, p)
	if err != nil {
		return result{}, err
	}
	p.resetPeak()
	start := time.Now()
	profiled := p.profile(ctx, cl, phaseName)
	defer func() { <-profiled }()
	if err := act(); err != nil {
		return result{}, err
	}
	if err := done(); err != nil {
		return result{}, err
	}
	took := time.Since(start)
	cpuAfter, err := readCPU(cl, p)
	if err != nil {
		return result{}, err
	}
	peak := p.resetPeak()
	after, err := readTraffic(ctx, cl, p)
	if err != nil {
		return result{}, err
	}
	down, up := scales()
	settled, err := p.settledRSS(ctx)
	if err != nil {
		return result{}, err
	}
	return result{
		Seconds:    took.Seconds(),
		CPUSeconds: (cpuAfter.controllers - cpuBefore.controllers).Seconds(),
		PeakRSSMB:  float64(peak) / 1024,
		RSSMB:      float64(settled) / 1024,
		traffic:    diffRequests(before.requests, after.requests, since(before.ownWrites, after.ownWrites)),
		ScaleDowns: down,
		ScaleUps:   up,

		ClusterCPUSeconds: (cpuAfter.cluster - cpuBefore.cluster).Seconds(),
		Queues:            diffQueues(before.queues, after.queues),
	}, nil
}

// trafficCounts are the API server's request counters, the bench's own writes and the controllers' workqueue
// metrics at one moment of a phase.
type trafficCounts struct {
	requests  requestCounts
	ownWrites map[string]int
	queues    queueMetrics
}

// readTraffic scrapes the API server's and the controllers' /metrics (p) and snapshots the bench's own writes.
func readTraffic(ctx context.Context, cl *cluster, p *process) (trafficCounts, error) {
	requests, err := scrapeRequests(ctx, cl.client)
	if err != nil {
		return trafficCounts{}, err
	}
	own := cl.ownWrites.snapshot()
	queues, err := scrapeQueues(ctx, cl.metrics, p.metricsURL())
	if err != nil {
		return trafficCounts{}, err
	}
	return trafficCounts{requests: requests, ownWrites: own, queues: queues}, nil
}

// cpuTimes are the CPU time (user + system) the controllers' process p and the cluster's process have used.
type cpuTimes struct{ controllers, cluster time.Duration }

// readCPU reads cpuTimes now.
func readCPU(cl *cluster, p *process) (cpuTimes, error) {
	controllers, err := p.cpu()
	if err != nil {
		return cpuTimes{}, err
	}
	cluster, err := cpuOf(cl.cmd.Process.Pid)
	if err != nil {
		return cpuTimes{}, err
	}
	return cpuTimes{controllers: controllers, cluster: cluster}, nil
}

// waitReplicas polls the Deployment every 100 ms until its rollout is complete at replicas: status for the
// current generation, and replicas, updated and available replicas all equal to replicas. It fails early when
// the controllers exit.
func waitReplicas(ctx context.Context, client kubernetes.Interface, ns, name string, replicas int32, p *process, timeout time.Duration) error {
	var last appsv1.DeploymentStatus
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := d.Status
		last = s
		return s.ObservedGeneration >= d.Generation && s.Replicas == replicas && s.UpdatedReplicas == replicas &&
			s.AvailableReplicas == replicas, nil
	})
	if err != nil {
		b, _ := json.Marshal(last)
		return fmt.Errorf("deployment %s/%s did not reach %d replicas: %w (last status %s)", ns, name, replicas, err, b)
	}
	return nil
}

// watchScales counts, from now until stop, the times a ReplicaSet in ns had its spec.replicas lowered or raised.
func watchScales(ctx context.Context, client kubernetes.Interface, ns string) (counts func() (down, up int), stop func(), err error) {
	var down, up atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().ReplicaSets().Informer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		was, now := oldObj.(*appsv1.ReplicaSet).Spec.Replicas, newObj.(*appsv1.ReplicaSet).Spec.Replicas
		switch {
		case was == nil || now == nil:
		case *now < *was:
			down.Add(1)
		case *now > *was:
			up.Add(1)
		}
	}})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, nil, fmt.Errorf("ReplicaSet watch in %s did not sync", ns)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); factory.Shutdown() }) }
	return func() (int, int) { return int(down.Load()), int(up.Load()) }, stop, nil
}

// deployment returns a RollingUpdate (25%/25%) Deployment of replicas pods labelled app=name.
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	quarter := intstr.FromString("25%")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx:1.9"}}},
			},
		},
	}
}

func createNamespace(ctx context.Context, client kubernetes.Interface, ns string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// deleteNamespace deletes ns and waits until it is gone (its pods removed by the generic controllers and KWOK).
func deleteNamespace(ctx context.Context, client kubernetes.Interface, ns string, timeout time.Duration) error {
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone: %w", ns, err)
	}
	return nil
}

// sum adds up a count map.
func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
