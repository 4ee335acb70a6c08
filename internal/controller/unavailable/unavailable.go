// Package unavailable says why a pod does not count as available to its
// ReplicaSet, in the words kubectl shows (ImagePullBackOff, CrashLoopBackOff,
// Unschedulable, ...), and groups a rollout's pods by that reason: the
// "why stuck" of `kubedeploy rollout watch` (issue 11). Failing says which
// of those pods will not become available without a change (Persistent
// reasons, pods never Ready): the rule `kubedeploy rollout plan` keeps them
// unavailable by (issue 44). It reads only pod fields; the one kubedeploy
// package it imports is rolloutstate, for the availability rule
// (rolloutstate.PodAvailable) the ReplicaSet controller counts with.
package unavailable

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// The reasons Of returns besides those the kubelet and the scheduler write
// (container waiting reasons such as ImagePullBackOff, and Unschedulable).
const (
	// Terminating: the pod has a deletionTimestamp.
	Terminating = "Terminating"
	// Pending: not scheduled and no scheduler verdict yet.
	Pending = "Pending"
	// NotReady: running (or starting) but not Ready, with no waiting reason.
	NotReady = "NotReady"
	// MinReadySeconds: Ready, but not yet for the ReplicaSet's minReadySeconds.
	MinReadySeconds = "MinReadySeconds"
	// Failed and Succeeded: the pod ended (it no longer counts at all).
	Failed    = "Failed"
	Succeeded = "Succeeded"
)

// ContainerCreating is the kubelet's waiting reason while it pulls an image
// and starts a container (Of returns it as the kubelet wrote it).
const ContainerCreating = "ContainerCreating"

// Of returns why pod is not available at now for a ReplicaSet with
// minReadySeconds (seconds), with a one-line message (container name and
// the kubelet's message where there is one), or ok=false when the pod is
// available. The checks, in order: deletion, phase Failed/Succeeded, the
// PodScheduled condition (False: its reason, usually Unschedulable), not
// scheduled yet (Pending), the first init or regular container waiting
// with a reason (ImagePullBackOff, ErrImagePull, CrashLoopBackOff,
// CreateContainerConfigError, ContainerCreating, ...), a terminated
// container with a non-zero exit, not Ready (NotReady, with for how long
// since the pod started), Ready for less than minReadySeconds.
func Of(pod *v1.Pod, minReadySeconds int32, now time.Time) (reason, message string, ok bool) {
	if pod.DeletionTimestamp != nil {
		return Terminating, "deleted at " + pod.DeletionTimestamp.UTC().Format(time.RFC3339), true
	}
	switch pod.Status.Phase {
	case v1.PodFailed:
		return Failed, orDefault(pod.Status.Message, pod.Status.Reason), true
	case v1.PodSucceeded:
		return Succeeded, "the pod's containers exited", true
	}
	if c := rolloutstate.PodCondition(pod, v1.PodScheduled); c != nil && c.Status == v1.ConditionFalse {
		return orDefault(c.Reason, "Unschedulable"), c.Message, true
	}
	if pod.Spec.NodeName == "" {
		return Pending, "not scheduled yet", true
	}
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if w := s.State.Waiting; w != nil && w.Reason != "" {
				return w.Reason, containerMessage(s.Name, w.Message), true
			}
			if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
				return orDefault(t.Reason, "Error"), containerMessage(s.Name, fmt.Sprintf("exit code %d %s", t.ExitCode, t.Message)), true
			}
		}
	}
	ready := rolloutstate.PodCondition(pod, v1.PodReady)
	if ready == nil || ready.Status != v1.ConditionTrue {
		since := pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			since = pod.Status.StartTime.Time
		}
		msg := fmt.Sprintf("not Ready after %s", now.Sub(since).Round(time.Second))
		if ready != nil && ready.Message != "" {
			msg += ": " + ready.Message
		}
		return NotReady, msg, true
	}
	if !rolloutstate.PodAvailable(pod, time.Duration(minReadySeconds)*time.Second, now) {
		readyFor := now.Sub(ready.LastTransitionTime.Time)
		return MinReadySeconds, fmt.Sprintf("Ready for %s of minReadySeconds %ds", readyFor.Round(time.Second), minReadySeconds), true
	}
	return "", "", false
}

// Group is the pods that share one reason.
type Group struct {
	// Reason is the reason Of gave.
	Reason string `json:"reason"`
	// Pods are the pods' names, sorted.
	Pods []string `json:"pods"`
	// Message is the first pod's message (in name order).
	Message string `json:"message,omitempty"`
}

// Groups classifies pods with Of and returns one Group per reason, the
// largest first (ties by reason), leaving out available pods.
func Groups(pods []*v1.Pod, minReadySeconds int32, now time.Time) []Group {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *v1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	byReason := map[string]*Group{}
	var out []*Group
	for _, p := range sorted {
		reason, msg, ok := Of(p, minReadySeconds, now)
		if !ok {
			continue
		}
		g := byReason[reason]
		if g == nil {
			g = &Group{Reason: reason, Message: msg}
			byReason[reason] = g
			out = append(out, g)
		}
		g.Pods = append(g.Pods, p.Name)
	}
	slices.SortStableFunc(out, func(a, b *Group) int {
		if c := cmp.Compare(len(b.Pods), len(a.Pods)); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	groups := make([]Group, len(out))
	for i, g := range out {
		groups[i] = *g
	}
	return groups
}

// persistent are the container waiting reasons (as the kubelet writes them) of a failure that does not resolve
// by itself: the kubelet retries, with a back-off, what fails again for the same template.
var persistent = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// Persistent reports whether reason, as Of returns it, is a failure that will not resolve by itself: an image
// that cannot be pulled (ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull), a container
// that keeps crashing (CrashLoopBackOff), or one that cannot be created or started (CreateContainerConfigError,
// CreateContainerError, RunContainerError). The pod stays unavailable until its template, or what the
// template refers to (an image, a ConfigMap, a Secret), changes. Reasons a rollout goes through by itself
// (Pending, ContainerCreating, NotReady, MinReadySeconds, Terminating) are not persistent, nor is
// Unschedulable: the pods a rollout scales down free room for it.
func Persistent(reason string) bool {
	return persistent[reason]
}

// Failing returns why pod will not become available without a change, with Of's message, or ok=false when it
// may still: the one rule `kubedeploy rollout plan` (internal/simulator) keeps failing pods unavailable by.
// A pod fails when Of's reason is Persistent, or when it is Running and not Ready with no container waiting
// or failed (Of's NotReady: a readiness probe that does not pass) for longer than notReadyFor (the time a
// pod is given to turn Ready) plus what its own probes take at the least (ProbeAllowance), since it last
// turned not Ready (its Ready condition's lastTransitionTime) or, without that time, since it started
// (status.startTime, else its creation). now is the time the pod is judged at.
func Failing(pod *v1.Pod, notReadyFor time.Duration, now time.Time) (reason, message string, ok bool) {
	reason, message, unavailable := Of(pod, 0, now)
	switch {
	case !unavailable:
		return "", "", false
	case Persistent(reason):
		return reason, message, true
	case reason == NotReady && pod.Status.Phase == v1.PodRunning && now.Sub(notReadySince(pod)) > notReadyFor+ProbeAllowance(pod):
		return reason, message, true
	}
	return "", "", false
}

// Probe defaults the API server gives (seconds, times).
const (
	defaultPeriodSeconds    = 10
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// ProbeAllowance returns the time pod's probes may take before a container that will turn Ready is: the
// largest, over its containers, of the startup probe's initialDelaySeconds + periodSeconds ×
// failureThreshold (the kubelet restarts a container that has not started by then) and the readiness
// probe's initialDelaySeconds + periodSeconds × successThreshold (its first passing probes); 0 for a pod
// without probes. Unset fields count as the API server's defaults (period 10 s, success 1, failure 3).
func ProbeAllowance(pod *v1.Pod) time.Duration {
	var longest int32
	for _, c := range pod.Spec.Containers {
		if p := c.StartupProbe; p != nil {
			longest = max(longest, p.InitialDelaySeconds+orInt(p.PeriodSeconds, defaultPeriodSeconds)*orInt(p.FailureThreshold, defaultFailureThreshold))
		}
		if p := c.ReadinessProbe; p != nil {
			longest = max(longest, p.InitialDelaySeconds+orInt(p.PeriodSeconds, defaultPeriodSeconds)*orInt(p.SuccessThreshold, defaultSuccessThreshold))
		}
	}
	return time.Duration(longest) * time.Second
}

func orInt(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// notReadySince is when pod, not Ready, last turned so: its Ready condition's lastTransitionTime, else
// status.startTime, else its creation.
func notReadySince(pod *v1.Pod) time.Time {
	if c := rolloutstate.PodCondition(pod, v1.PodReady); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

func containerMessage(container, msg string) string {
	if msg == "" {
		return "container " + container
	}
	return "container " + container + ": " + msg
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
