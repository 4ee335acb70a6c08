package simulator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// Failing pods (issue 44). A simulated kubelet would otherwise make every pod
// Ready PodStartup after its creation, so that a rollout stuck on a broken
// image looked as if it completed. The rules, all here:
//
//   - A pod of the cluster fails when unavailable.Failing says so, PodStartup
//     being the time a pod is given to turn Ready: its container waits with a
//     reason that does not resolve by itself (ImagePullBackOff, ErrImagePull,
//     CrashLoopBackOff, CreateContainerConfigError, ...: unavailable.Persistent),
//     or it is Running and not Ready, nothing waiting, for longer than
//     PodStartup plus what its own probes take at the least
//     (unavailable.ProbeAllowance: a readiness probe's initial delay and
//     first pass, a startup probe's time to start) since it last turned not
//     Ready ("never Ready": a readiness probe that does not pass). A failing pod never turns Ready in the
//     simulation and is never counted available.
//   - A ReplicaSet whose live pods include a failing one and none that is
//     Ready has a failing template: same template, same image, same outcome.
//     Its pods that are not Ready yet fail as its first failing pod (by name)
//     does, and so does every pod the simulation creates for it (failLike).
//   - A ReplicaSet with a Ready pod keeps its failing pods failing, but its new
//     pods start normally (the failure is the pod's, its node's say). A
//     template no pod shows failing (a changed one, or one whose ReplicaSet
//     has no pods now) starts normally.

// failingExemplar returns the pod that stands for owned's template when it
// fails (see above): the first failing pod by name, when none of owned's
// live pods is Ready; nil otherwise. owned are one ReplicaSet's pods, judged
// at now.
func failingExemplar(owned []*v1.Pod, startup time.Duration, now time.Time) *v1.Pod {
	var exemplar *v1.Pod
	for _, p := range owned {
		if p.DeletionTimestamp != nil {
			continue
		}
		if podReady(p) {
			return nil
		}
		if failingNow(p, startup, now) && (exemplar == nil || p.Name < exemplar.Name) {
			exemplar = p
		}
	}
	return exemplar
}

// failingNow reports whether pod fails at now, given startup to turn Ready:
// unavailable.Failing, the one rule.
func failingNow(pod *v1.Pod, startup time.Duration, now time.Time) bool {
	_, _, failing := unavailable.Failing(pod, startup, now)
	return failing
}

// failLike gives pod, created at its creationTimestamp, the status of
// exemplar, a failing pod of the same template, as the kubelet would write
// it for pod: its phase, conditions (not Ready) and container states
// (ImagePullBackOff, CrashLoopBackOff, ... or running and not Ready), timed
// from pod's creation, without exemplar's IPs.
func failLike(pod, exemplar *v1.Pod) {
	at := pod.CreationTimestamp
	st := exemplar.Status.DeepCopy()
	st.StartTime = &at
	st.HostIP, st.HostIPs, st.PodIP, st.PodIPs = "", nil, "", nil
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = at
		st.Conditions[i].LastProbeTime = metav1.Time{}
	}
	for _, statuses := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range statuses {
			if r := statuses[i].State.Running; r != nil {
				r.StartedAt = at
			}
		}
	}
	pod.Status = *st
}

// Stuck says why a simulated rollout will not complete without a change:
// pods that fail (failing.go's rules) and what the Deployment controller
// does about it.
type Stuck struct {
	// ReplicaSets are the ReplicaSets with failing pods, the new one first,
	// then the old ones oldest first.
	ReplicaSets []FailingReplicaSet `json:"replicaSets"`
	// ProgressDeadlineSeconds is the Deployment's spec.progressDeadlineSeconds
	// (seconds); 0 when it has none (unset or math.MaxInt32): then nothing
	// reports the rollout failed.
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
	// Deadline is when the Deployment's Progressing condition turns False with
	// reason ProgressDeadlineExceeded (ST-13): the condition's lastUpdateTime
	// (its last progress) + progressDeadlineSeconds, on the cluster's clock;
	// when DeadlineExceeded, when it turned so. Nil without a deadline, or
	// when none runs (deadlineRuns).
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// DeadlineSeconds is Deadline in seconds since the plan's start (the
	// change), as Step.Seconds; 0 or less when it has passed.
	DeadlineSeconds float64 `json:"deadlineSeconds,omitempty"`
	// ProgressingReason is the reason of the Deployment's Progressing
	// condition at the end of the simulation ("" without one); no deadline
	// runs after NewReplicaSetAvailable, RolloutPartitioned or
	// InvalidRolloutPartition.
	ProgressingReason string `json:"progressingReason,omitempty"`
	// DeadlineExceeded reports that the condition already says
	// ProgressDeadlineExceeded.
	DeadlineExceeded bool `json:"deadlineExceeded,omitempty"`
	// AutoRollback is what the controller does at the deadline for a
	// Deployment opted into kubedeploy.io/rollback-on-progress-deadline
	// (EX-2), as rolloutstate.PlanAutoRollback decides it; nil when not
	// opted in or without a deadline.
	AutoRollback *AutoRollback `json:"autoRollback,omitempty"`
}

// FailingReplicaSet is one ReplicaSet's failing pods.
type FailingReplicaSet struct {
	// Name is the ReplicaSet's name; New reports that it is the new one.
	Name string `json:"name"`
	New  bool   `json:"new"`
	// Groups are its failing pods by reason (unavailable.Groups: the reason
	// and message `rollout watch` shows), the largest first; simulated pods
	// have simulated names.
	Groups []unavailable.Group `json:"groups"`
}

// AutoRollback is EX-2's decision for a stuck Deployment at its deadline.
type AutoRollback struct {
	// FailedRevision is the revision that exceeds its deadline.
	FailedRevision int64 `json:"failedRevision"`
	// Revision and ReplicaSet are what the controller rolls back to: the
	// last revision that completed and its ReplicaSet; 0 and "" when
	// Skipped says why it does not.
	Revision   int64  `json:"revision,omitempty"`
	ReplicaSet string `json:"replicaSet,omitempty"`
	Skipped    string `json:"skipped,omitempty"`
}

// Pods returns how many failing pods rs has.
func (rs FailingReplicaSet) Pods() int {
	n := 0
	for _, g := range rs.Groups {
		n += len(g.Pods)
	}
	return n
}

// Summary is Stuck in one line: "will not complete without a change: 10
// pods of the new ReplicaSet web-5d4f fail (ImagePullBackOff)".
func (s *Stuck) Summary() string {
	parts := make([]string, len(s.ReplicaSets))
	for i, rs := range s.ReplicaSets {
		which, verb := "an old", "fail"
		if rs.New {
			which = "the new"
		}
		if rs.Pods() == 1 {
			verb = "fails"
		}
		reasons := make([]string, len(rs.Groups))
		for j, g := range rs.Groups {
			reasons[j] = g.Reason
		}
		parts[i] = fmt.Sprintf("%s of %s ReplicaSet %s %s (%s)", podCount(rs.Pods()), which, rs.Name, verb, strings.Join(reasons, ", "))
	}
	return "will not complete without a change: " + strings.Join(parts, "; ")
}

// podCount is "1 pod" or "N pods".
func podCount(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return strconv.Itoa(n) + " pods"
}

// stuckOf returns why the rollout in st will not complete, or nil when no
// pod fails: the failing pods of each ReplicaSet, the progress deadline and
// EX-2's rollback.
func (s *simulation) stuckOf(st *state) *Stuck {
	out := &Stuck{}
	rss := slices.Clone(st.oldRSs)
	if st.newRS != nil {
		rss = append([]*appsv1.ReplicaSet{st.newRS}, rss...)
	}
	for _, rs := range rss {
		var failing []*v1.Pod
		for _, p := range st.activePods(rs) {
			if t := s.pods[p.UID]; t != nil && t.fails {
				failing = append(failing, p)
			}
		}
		if len(failing) > 0 {
			out.ReplicaSets = append(out.ReplicaSets, FailingReplicaSet{Name: rs.Name, New: rs == st.newRS,
				Groups: unavailable.Groups(failing, rs.Spec.MinReadySeconds, s.clock.Now())})
		}
	}
	if len(out.ReplicaSets) == 0 {
		return nil
	}
	s.deadline(st, out)
	return out
}

// deadline fills out's progress deadline from the stored Deployment's
// Progressing condition (ST-13) and, for a Deployment opted into EX-2, what
// rolloutstate.PlanAutoRollback decides then.
func (s *simulation) deadline(st *state, out *Stuck) {
	d := st.d
	if !rolloutstate.HasProgressDeadline(d) {
		return
	}
	out.ProgressDeadlineSeconds = *d.Spec.ProgressDeadlineSeconds
	cond := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	if cond == nil {
		return
	}
	if out.ProgressingReason = cond.Reason; !deadlineRuns(cond.Reason) {
		return
	}
	at := cond.LastUpdateTime.Add(time.Duration(out.ProgressDeadlineSeconds) * time.Second)
	if out.DeadlineExceeded = rolloutstate.DeadlineExceeded(&d.Status); out.DeadlineExceeded {
		at = cond.LastTransitionTime.Time
	}
	out.Deadline = &metav1.Time{Time: at}
	out.DeadlineSeconds = at.Sub(s.start).Round(time.Millisecond).Seconds()
	if !rolloutstate.RollsBackOnDeadline(d) {
		return
	}
	p := rolloutstate.PlanAutoRollback(d, st.newRS, st.oldRSs)
	out.AutoRollback = &AutoRollback{FailedRevision: p.Failed, Skipped: p.Skipped}
	if p.Target != nil {
		out.AutoRollback.ReplicaSet = p.Target.Name
		out.AutoRollback.Revision, _ = strconv.ParseInt(p.Target.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	}
}

// deadlineRuns reports whether a progress deadline runs while the
// Progressing condition has reason: not once the rollout completed
// (NewReplicaSetAvailable: pods failing since do not fail it, ST-13) nor
// while a partition holds it (EX-1).
func deadlineRuns(reason string) bool {
	switch reason {
	case rolloutstate.NewReplicaSetAvailable, rolloutstate.RolloutPartitioned, rolloutstate.InvalidRolloutPartition:
		return false
	}
	return true
}
