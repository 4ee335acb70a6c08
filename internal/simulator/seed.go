package simulator

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// State is what Simulate starts from.
type State struct {
	// Deployment is the Deployment as it is or will be after the change,
	// with its status as stored. Required.
	Deployment *appsv1.Deployment
	// ReplicaSets are the ReplicaSets the Deployment controls now, with
	// their status.
	ReplicaSets []*appsv1.ReplicaSet
	// Pods are the ReplicaSets' pods as the cluster has them (others are
	// ignored). Optional: a ReplicaSet none of them belongs to gets pods
	// made from its status.
	Pods []*v1.Pod
	// Nodes are the cluster's nodes (names and labels are read). Optional: with them, a Deployment annotated
	// kubedeploy.io/scale-down-spread (EX-4) has its new pods placed across the topology domains (see
	// placement), its scale-downs choose their victims by EX-4, and each Step reports its Spread; without
	// them, every simulated pod runs on one node.
	Nodes []*v1.Node
	// Now is the wall-clock time of the change, the simulation's start: the
	// pods' ages and readiness count to it, as RS-14's log-scale buckets
	// compare them. Zero means the latest time in Pods and ReplicaSets (a
	// fixed time without Pods); an earlier Now than that is raised to it.
	Now time.Time
	// Stored are the Deployment and its ReplicaSets as the API server stores them (JSON), for a cluster newer
	// than kubedeploy's API (IM-8): the fields of their pod templates kubedeploy does not know are carried onto
	// Deployment and ReplicaSets (matched by kind and name), so the new ReplicaSet's name (pod-template-hash)
	// and template are the controller's. Optional: without them the templates are taken as typed.
	Stored []*unstructured.Unstructured
}

// startOf returns the wall-clock time of the change: from.Now, or the
// latest time in from's pods (creation, condition transitions, deletion)
// and ReplicaSets' creation when that is later, so that their ages and
// readiness keep their meaning on the simulated clock; defaultStart when
// from has neither Now nor pods. It is rounded up to a whole second, the resolution of every time the API
// server keeps (and of EX-5's step starts), so that the plan's times are whole seconds where the cluster's are.
func startOf(from State) time.Time {
	if len(from.Pods) == 0 && from.Now.IsZero() {
		return defaultStart
	}
	latest := from.Now
	later := func(t metav1.Time) {
		if t.After(latest) {
			latest = t.Time
		}
	}
	for _, rs := range from.ReplicaSets {
		later(rs.CreationTimestamp)
	}
	for _, p := range from.Pods {
		later(p.CreationTimestamp)
		for _, c := range p.Status.Conditions {
			later(c.LastTransitionTime)
		}
		if p.DeletionTimestamp != nil {
			later(*p.DeletionTimestamp)
		}
	}
	if r := latest.Truncate(time.Second); !r.Equal(latest) {
		return r.Add(time.Second)
	}
	return latest
}

// seedPods stores rs's pods: those of pods it controls as they are
// (seedPod), or, when it controls none of them, pods made from its status
// (see Simulate), created an hour before the change, a second apart, oldest
// first. When rs's pods show its template failing (failingExemplar), every
// pod started for it fails too.
func (s *simulation) seedPods(rs *appsv1.ReplicaSet, pods []*v1.Pod) error {
	if owned := rolloutstate.ControlledBy(pods, rs.UID); len(owned) > 0 {
		exemplar := failingExemplar(owned, s.cfg.PodStartup, s.start)
		if exemplar != nil {
			s.failing[rs.UID] = exemplar
		}
		for _, p := range owned {
			if err := s.tracker.Add(s.seedPod(p, exemplar)); err != nil {
				return fmt.Errorf("simulate: %w", err)
			}
		}
		return nil
	}
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for i := range rs.Status.Replicas {
		readyAt := s.cfg.PodStartup
		switch {
		case i < rs.Status.AvailableReplicas:
			readyAt = -minReady
		case i < max(rs.Status.ReadyReplicas, rs.Status.AvailableReplicas):
			readyAt = 0
		}
		pod := newPod(rs)
		pod.CreationTimestamp = metav1.NewTime(s.start.Add(-time.Hour + time.Duration(i)*time.Second))
		s.startPod(pod, readyAt)
		if err := s.tracker.Add(pod); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
	}
	return nil
}

// seedPod returns a copy of an existing pod for the simulated cluster and
// notes when it turns Ready (already, by its Ready condition; else
// PodStartup after its creation, or at once), that it never does (it ended,
// it fails, or it is not Ready yet and exemplar, its template's failing pod,
// says it will fail as that one does: failing.go) or, when Terminating, when
// it is gone (PodTermination from now).
func (s *simulation) seedPod(p *v1.Pod, exemplar *v1.Pod) *v1.Pod {
	pod := p.DeepCopy()
	pod.ResourceVersion = "1"
	if pod.UID == "" {
		s.nextID++
		pod.UID = types.UID("simulated-pod-" + strconv.Itoa(s.nextID))
	}
	times := &podTimes{readyAt: max(pod.CreationTimestamp.Sub(s.start)+s.cfg.PodStartup, 0)}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			times.readyAt = c.LastTransitionTime.Sub(s.start)
		}
	}
	switch {
	case pod.DeletionTimestamp != nil:
		times.deleted, times.goneAt = true, s.cfg.PodTermination
	case pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded:
		times.fails = true // ended: never Ready again; the ReplicaSet replaces it
	case podReady(pod):
	case exemplar != nil:
		if !failingNow(pod, s.cfg.PodStartup, s.start) {
			failLike(pod, exemplar)
		}
		times.fails = true
	default:
		times.fails = failingNow(pod, s.cfg.PodStartup, s.start)
	}
	s.pods[pod.UID] = times
	return pod
}
