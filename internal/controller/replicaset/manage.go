package replicaset

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Event reasons the controller records on ReplicaSets (section 17).
const (
	// SuccessfulCreate: Normal, "Created pod: <name>".
	SuccessfulCreate = "SuccessfulCreate"
	// FailedCreate: Warning, "Error creating: <err>" (not for a terminating namespace).
	FailedCreate = "FailedCreate"
	// SuccessfulDelete: Normal, "Deleted pod: <name>".
	SuccessfulDelete = "SuccessfulDelete"
	// FailedDelete: Warning, "Error deleting: <err>" (not for NotFound).
	FailedDelete = "FailedDelete"
)

// DefaultBurstReplicas is the most pods created or deleted in one sync (CM-4, RS-12).
const DefaultBurstReplicas = 500

// slowStartInitialBatchSize is the size of the first create batch (RS-13, CM-8).
const slowStartInitialBatchSize = 1

// replicaDiff returns active − desired, clamped in magnitude to burst (RS-12).
func replicaDiff(active, desired, burst int) int {
	return max(-burst, min(active-desired, burst))
}

// manageReplicas creates or deletes pods so that sc.pods approaches
// spec.replicas (RS-12..RS-14), setting expectations before any write
// (RS-9, RS-10). It returns the first write error.
func (c *Controller) manageReplicas(ctx context.Context, sc *syncContext) error {
	diff := replicaDiff(len(sc.pods), replicas(sc.rs), c.cfg.BurstReplicas)
	logger := klog.FromContext(ctx)
	switch {
	case diff < 0:
		n := -diff
		// IM-8: the template as stored, when it has fields kubedeploy's API does not know.
		stored, err := c.cfg.Templates.Template(ctx, sc.rs)
		if err != nil {
			return err
		}
		c.expectations.ExpectCreations(logger, sc.key, n)
		logger.V(2).Info("Too few replicas", "replicaSet", klog.KObj(sc.rs), "need", replicas(sc.rs), "creating", n)
		created, err := c.createPods(ctx, sc.rs, n, stored)
		if skipped := n - created; skipped > 0 {
			// RS-9: pods never attempted (or failed) will produce no add event.
			logger.V(2).Info("Slow-start failure; skipping remaining pod creations", "replicaSet", klog.KObj(sc.rs), "skipped", skipped)
			c.expectations.LowerExpectations(logger, sc.key, skipped, 0)
		}
		return err
	case diff > 0:
		related, err := c.relatedPods(sc.rs)
		if err != nil {
			return fmt.Errorf("listing pods related to ReplicaSet %s: %w", sc.key, err)
		}
		victims := podsToDelete(sc.pods, related, diff, sc.now, c.spreadFor(ctx, sc.rs))
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = podKey(p)
		}
		c.expectations.ExpectDeletions(logger, sc.key, keys)
		logger.V(2).Info("Too many replicas", "replicaSet", klog.KObj(sc.rs), "need", replicas(sc.rs), "deleting", diff)
		return c.deletePods(ctx, sc.key, sc.rs, victims)
	}
	return nil
}

// spreadFor returns how rs's scale-down keeps the Deployment's pods spread
// (EX-4), or nil for RS-14's ranking alone: when rs has no
// kubedeploy.io/scale-down-spread annotation, when its value is invalid (a
// Warning InvalidScaleDownSpread event on rs says why) or when the
// controller has no node cache (Config.Nodes nil; logged at -v 2).
func (c *Controller) spreadFor(ctx context.Context, rs *appsv1.ReplicaSet) *spread {
	keys, err := rolloutstate.ScaleDownSpreadKeys(rs.Annotations, &rs.Spec.Template)
	if err != nil {
		c.cfg.Recorder.Eventf(rs, v1.EventTypeWarning, InvalidScaleDownSpread, "%v; choosing the pods to delete by the default ranking", err)
		return nil
	}
	if keys == nil {
		return nil
	}
	if c.nodeLabels == nil {
		klog.FromContext(ctx).V(2).Info("No node cache; choosing the pods to delete by the default ranking", "replicaSet", klog.KObj(rs), "topologyKeys", keys)
		return nil
	}
	return &spread{keys: keys, nodes: c.nodeLabels}
}

// maxPodWritesInFlight is how many pod creates and deletes one ReplicaSet controller has in flight at once, all
// workers together. kube-apiserver allows 100 concurrent streams per HTTP/2 connection unless told otherwise
// (--http2-max-streams-per-connection); requests beyond what the client's connection can take make client-go's
// transport dial, and TLS-handshake, a connection for each waiting request, most of them closed again at once
// (issue 48: the handshakes were 14-16% of the controllers' CPU in a 944-pod scale-down). 64 leaves room for the
// watches and status writes sharing that connection; the server admits 200 mutating requests at once by default.
// In the bench's 900-pod scale-down the phase took 1.0-1.8 s with the bound, as it did without (2026-12-02).
const maxPodWritesInFlight = 64

// concurrently calls fn(0) … fn(n-1) concurrently, each holding a token of inFlight while it runs (so at most
// cap(inFlight) run at once across all callers sharing it), and returns when all have returned.
func concurrently(inFlight chan struct{}, n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		inFlight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inFlight }()
			fn(i)
		})
	}
	wg.Wait()
}

// slowStartBatchSizes returns the batch sizes used to make count calls:
// initial, then doubling, the last batch holding what remains (RS-13).
func slowStartBatchSizes(count, initial int) []int {
	var sizes []int
	for size := min(count, initial); count > 0; size = min(2*size, count) {
		sizes = append(sizes, size)
		count -= size
	}
	return sizes
}

// slowStartBatch calls fn count times in batches of slowStartBatchSizes, each
// batch concurrently (a token of inFlight per call in flight: concurrently), and stops after the first batch with a failure (RS-13).
// It returns the number of successful calls and the first error.
func slowStartBatch(inFlight chan struct{}, count, initial int, fn func() error) (int, error) {
	successes := 0
	for _, size := range slowStartBatchSizes(count, initial) {
		errCh := make(chan error, size)
		concurrently(inFlight, size, func(int) {
			if err := fn(); err != nil {
				errCh <- err
			}
		})
		successes += size - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
	}
	return successes, nil
}

// createPods creates n pods from rs's template with slow start (RS-13),
// recording an event per pod and each returned resourceVersion for IM-4. A
// create refused because the namespace is terminating counts as a success.
// When stored (rs's template as the API server stored it) is not nil, each
// pod's spec is stored's, sent as JSON through Client's
// CreatePodUnstructured, so that fields kubedeploy's API does not know reach
// the pods (IM-8). It returns the number of successes and the first error.
func (c *Controller) createPods(ctx context.Context, rs *appsv1.ReplicaSet, n int, stored map[string]any) (int, error) {
	key := keyOf(rs)
	return slowStartBatch(c.podWrites, n, slowStartInitialBatchSize, func() error {
		created, err := c.createPod(ctx, rs, stored)
		if err != nil {
			if runner.IsNamespaceTerminating(err) {
				return nil
			}
			if !runner.IsStopping(err) {
				c.cfg.Recorder.Eventf(rs, v1.EventTypeWarning, FailedCreate, "Error creating: %v", err)
			}
			return err
		}
		c.freshness.Written(key, resourcePods, created)
		klog.FromContext(ctx).V(4).Info("Created pod", "replicaSet", klog.KObj(rs), "pod", klog.KObj(created))
		c.cfg.Recorder.Eventf(rs, v1.EventTypeNormal, SuccessfulCreate, "Created pod: %v", created.Name)
		return nil
	})
}

// createPod creates one pod of rs (RS-9): from rs's typed template, or with
// stored's spec when it is not nil (IM-8). It returns the created pod, typed,
// or the error of building or creating it.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet, stored map[string]any) (*v1.Pod, error) {
	pod, err := podFromTemplate(rs)
	if err != nil {
		return nil, err
	}
	if stored == nil {
		return c.cfg.Client.CreatePod(ctx, rs.Namespace, pod)
	}
	u, err := rawtemplate.PodWithTemplateSpec(pod, stored)
	if err != nil {
		return nil, err
	}
	created, err := c.cfg.Client.CreatePodUnstructured(ctx, rs.Namespace, u)
	if err != nil {
		return nil, err
	}
	return rawtemplate.PodFrom(created)
}

// deletePods deletes victims concurrently (RS-14; within maxPodWritesInFlight), remembering each
// successful delete for the IM-4 guard. A failed delete lowers the deletion
// expectation at once; NotFound is not an error and records no event
// (RS-10). It returns the first other error.
func (c *Controller) deletePods(ctx context.Context, key string, rs *appsv1.ReplicaSet, victims []*v1.Pod) error {
	logger := klog.FromContext(ctx)
	errCh := make(chan error, len(victims))
	concurrently(c.podWrites, len(victims), func(i int) {
		pod := victims[i]
		err := c.cfg.Client.DeletePod(ctx, pod.Namespace, pod.Name)
		if err == nil {
			c.freshness.Deleted(key, resourcePods, pod)
			logger.V(4).Info("Deleted pod", "replicaSet", klog.KObj(rs), "pod", klog.KObj(pod))
			c.cfg.Recorder.Eventf(rs, v1.EventTypeNormal, SuccessfulDelete, "Deleted pod: %v", pod.Name)
			return
		}
		c.expectations.DeletionObserved(logger, key, podKey(pod))
		if apierrors.IsNotFound(err) {
			logger.V(2).Info("Pod already deleted", "replicaSet", klog.KObj(rs), "pod", klog.KObj(pod))
			return
		}
		if !runner.IsStopping(err) {
			c.cfg.Recorder.Eventf(rs, v1.EventTypeWarning, FailedDelete, "Error deleting: %v", err)
		}
		errCh <- fmt.Errorf("deleting pod %s: %w", podKey(pod), err)
	})
	select {
	case err := <-errCh:
		return err
	default:
		return nil
	}
}
