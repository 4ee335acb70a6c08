package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// probeWorkers is how many clients create pods at once in the raw pod-create probe.
	probeWorkers = 32
	// probeScheduler is a scheduler name nothing serves: the probe's pods stay unscheduled, so no binding,
	// kubelet (KWOK) or controller work follows their creation.
	probeScheduler = "kubedeploy-bench-nobody"
)

// probe is one measurement of B, the cluster's raw pod-create rate.
type probe struct {
	Pods int
	Took time.Duration
}

// rate is B in pod creates per second.
func (p probe) rate() float64 { return float64(p.Pods) / p.Took.Seconds() }

// probeCreates creates n bare pods in namespace ns with probeWorkers concurrent unthrottled clients, times it,
// and deletes the namespace again.
func probeCreates(ctx context.Context, cl *cluster, ns string, n int) (probe, error) {
	if err := createNamespace(ctx, cl.client, ns); err != nil {
		return probe{}, err
	}
	next := make(chan int)
	errs := make(chan error, probeWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for range probeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Labels: map[string]string{"app": "probe"}},
					Spec: v1.PodSpec{SchedulerName: probeScheduler,
						Containers: []v1.Container{{Name: "app", Image: "nginx:1.9"}}},
				}
				if _, err := cl.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return probe{}, fmt.Errorf("pod-create probe: %w", err)
	}
	if err := deleteNamespace(ctx, cl.client, ns, 10*time.Minute); err != nil {
		return probe{}, err
	}
	return probe{Pods: n, Took: took}, nil
}
