package rolloutmetrics

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
)

// FeedFromInformers makes the process's rollout metrics (Register) follow factory's Deployments, ReplicaSets
// and pods: call it before the factory starts, run the returned Feeder, and call stop when done. It returns
// NewFeeder's error, wrapped in "rollout metrics: ", when the feeder cannot be attached to the informers.
func FeedFromInformers(ctx context.Context, factory informers.SharedInformerFactory) (feeder *Feeder, stop func(), err error) {
	tracker := NewTracker()
	feeder, err = NewFeeder(tracker, Sources{
		Deployments: factory.Apps().V1().Deployments(),
		ReplicaSets: factory.Apps().V1().ReplicaSets(),
		Pods:        factory.Core().V1().Pods(),
	}, nil, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rollout metrics: %w", err)
	}
	return feeder, Use(tracker, klog.FromContext(ctx)), nil
}
