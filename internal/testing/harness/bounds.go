package harness

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Bounds are the rolling-update safety bounds of one Deployment, in replicas:
// the ReplicaSets it owns may never total more than MaxTotal (spec.replicas +
// maxSurge) and their available replicas never fewer than MinAvailable
// (spec.replicas - maxUnavailable).
type Bounds struct {
	MaxTotal     int32
	MinAvailable int32
}

// RolloutWatch watches every ReplicaSet of one Deployment from an informer and
// checks Bounds on every change it sees, not only at the end.
type RolloutWatch struct {
	t          *testing.T
	deployment string
	opts       WatchOptions
	stop       chan struct{}
	store      cache.Store

	mu           sync.Mutex
	changes      int
	maxTotal     int32
	minAvailable int32
	violations   []string
	history      []string
}

// WatchRollout starts watching Deployment ns/name. Call it once the Deployment
// is complete and before the change that starts a rollout; call Stop and then
// Check when the rollout is done.
func WatchRollout(t *testing.T, client kubernetes.Interface, ns, name string, b Bounds) *RolloutWatch {
	t.Helper()
	return WatchRolloutWith(t, client, ns, name, WatchOptions{Bounds: &b})
}

// WatchOptions choose the invariants a RolloutWatch checks at every change.
type WatchOptions struct {
	// Bounds are fixed rolling-update bounds; nil checks none.
	Bounds *Bounds
	// SurgeFromAnnotations checks that the ReplicaSets never total more than
	// the largest max-replicas annotation (OM-4: spec.replicas + maxSurge at
	// the controller's last write) among the active ones. It stays valid
	// while the Deployment is scaled, where fixed Bounds cannot.
	SurgeFromAnnotations bool
	// OneNewReplicaSet checks that no two owned ReplicaSets share a pod
	// template (ignoring pod-template-hash) or a revision: the controller
	// never creates a second ReplicaSet for one template (RV-1, RU-13).
	OneNewReplicaSet bool
}

// WatchRolloutWith is WatchRollout with a choice of invariants.
func WatchRolloutWith(t *testing.T, client kubernetes.Interface, ns, name string, o WatchOptions) *RolloutWatch {
	t.Helper()
	w := &RolloutWatch{t: t, deployment: name, opts: o, stop: make(chan struct{}), minAvailable: 1<<31 - 1}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().ReplicaSets().Informer()
	w.store = inf.GetStore()
	startInformer(t, factory, inf, w.stop, "ReplicaSet informer", w.observe)
	t.Cleanup(w.Stop)
	return w
}

func (w *RolloutWatch) owned(rs *appsv1.ReplicaSet) bool {
	ref := metav1.GetControllerOf(rs)
	return ref != nil && ref.Kind == "Deployment" && ref.Name == w.deployment
}

func (w *RolloutWatch) observe() {
	var total, available, surgeBound int32
	var sizes []string
	var owned []*appsv1.ReplicaSet
	for _, obj := range w.store.List() {
		rs := obj.(*appsv1.ReplicaSet)
		if !w.owned(rs) {
			continue
		}
		owned = append(owned, rs)
		spec := rolloutstate.ReplicaSetReplicas(rs)
		total += spec
		available += rs.Status.AvailableReplicas
		if n, err := strconv.ParseInt(rs.Annotations[rolloutstate.MaxReplicasAnnotation], 10, 32); err == nil && spec > 0 {
			surgeBound = max(surgeBound, int32(n))
		}
		sizes = append(sizes, fmt.Sprintf("%s=%d/%d", rs.Name, spec, rs.Status.AvailableReplicas))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes++
	w.history = append(w.history, fmt.Sprint(sizes))
	w.maxTotal = max(w.maxTotal, total)
	w.minAvailable = min(w.minAvailable, available)
	if b := w.opts.Bounds; b != nil && total > b.MaxTotal {
		w.violations = append(w.violations, fmt.Sprintf("ReplicaSets total %d > %d: %v", total, b.MaxTotal, sizes))
	}
	if b := w.opts.Bounds; b != nil && available < b.MinAvailable {
		w.violations = append(w.violations, fmt.Sprintf("available %d < %d: %v", available, b.MinAvailable, sizes))
	}
	if w.opts.SurgeFromAnnotations && surgeBound > 0 && total > surgeBound {
		w.violations = append(w.violations, fmt.Sprintf("ReplicaSets total %d > max-replicas %d: %v", total, surgeBound, sizes))
	}
	if w.opts.OneNewReplicaSet {
		if v := duplicateReplicaSets(owned); v != "" {
			w.violations = append(w.violations, v+fmt.Sprintf(": %v", sizes))
		}
	}
}

// duplicateReplicaSets describes two ReplicaSets sharing a template (hash
// label ignored) or a revision annotation, or returns "".
func duplicateReplicaSets(rss []*appsv1.ReplicaSet) string {
	for i, a := range rss {
		for _, b := range rss[i+1:] {
			if ra := a.Annotations[rolloutstate.RevisionAnnotation]; ra != "" && ra == b.Annotations[rolloutstate.RevisionAnnotation] {
				return fmt.Sprintf("%s and %s both have revision %s", a.Name, b.Name, ra)
			}
			if equalIgnoringHash(a.Spec.Template, b.Spec.Template) {
				return fmt.Sprintf("%s and %s have the same pod template", a.Name, b.Name)
			}
		}
	}
	return ""
}

func equalIgnoringHash(a, b v1.PodTemplateSpec) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

// Stop stops watching. It is safe to call more than once.
func (w *RolloutWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

// Check fails the test if a bound was ever broken, or if fewer than
// minChanges ReplicaSet changes were seen (a watch that saw nothing proves
// nothing). It logs the extremes observed.
func (w *RolloutWatch) Check(minChanges int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.opts.Bounds; b != nil {
		w.t.Logf("rollout of %s: %d ReplicaSet changes seen, max total %d (bound %d), min available %d (bound %d)",
			w.deployment, w.changes, w.maxTotal, b.MaxTotal, w.minAvailable, b.MinAvailable)
	} else {
		w.t.Logf("rollout of %s: %d ReplicaSet changes seen, max total %d, min available %d",
			w.deployment, w.changes, w.maxTotal, w.minAvailable)
	}
	if w.changes < minChanges {
		w.t.Errorf("saw only %d ReplicaSet changes, want at least %d", w.changes, minChanges)
	}
	if len(w.violations) > 0 {
		w.t.Logf("ReplicaSet states seen (name=spec/available):\n%s", strings.Join(w.history, "\n"))
	}
	for i, v := range w.violations {
		if i == 10 {
			w.t.Errorf("... and %d more violations", len(w.violations)-10)
			break
		}
		w.t.Errorf("bound broken: %s", v)
	}
}
