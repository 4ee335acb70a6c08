package replicaset

import (
	"math"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// PodDeletionCostAnnotation is the pod annotation whose int32 value orders
// scale-down victims, lower cost first (OM-9, RS-14 rule 4). The pod cache
// keeps it (podcache.Transform).
const PodDeletionCostAnnotation = podcache.PodDeletionCostAnnotation

// podsToDelete returns the diff pods to delete on scale-down (RS-14). When
// diff is smaller than len(pods) they are ranked by rankedPodsLess, where a
// pod's rank is the number of active related pods on its node; otherwise all
// pods are returned. now drives the log2 time bucketing. With sp (EX-4), the
// pods that tie on rules 1-4 where diff runs out are chosen from the most
// crowded topology domains instead (spread.spreadVictims); nil sp is
// upstream's ranking exactly.
func podsToDelete(pods, related []*v1.Pod, diff int, now time.Time, sp *spread) []*v1.Pod {
	if diff >= len(pods) {
		return pods
	}
	ranked := make([]rankedPod, len(pods))
	ranks := ranksOnSameNode(pods, related)
	for i, p := range pods {
		ranked[i] = rankedPod{pod: p, rank: ranks[i], cost: podDeletionCost(p)}
	}
	sort.Slice(ranked, func(i, j int) bool { return rankedPodsLess(ranked[i], ranked[j], now) })
	if sp != nil {
		return sp.spreadVictims(ranked, related, diff)
	}
	out := make([]*v1.Pod, diff)
	for i := range out {
		out[i] = ranked[i].pod
	}
	return out
}

// rankedPod is a pod with what RS-14 ranks it by.
type rankedPod struct {
	pod  *v1.Pod
	rank int
	cost int32
}

// ranksOnSameNode returns, for each pod, the number of active related pods on
// the same node name (unscheduled pods share ""). related is deduplicated by
// UID by the caller and includes pods themselves (RS-14).
func ranksOnSameNode(pods, related []*v1.Pod) []int {
	onNode := map[string]int{}
	for _, p := range related {
		if isPodActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranks := make([]int, len(pods))
	for i, p := range pods {
		ranks[i] = onNode[p.Spec.NodeName]
	}
	return ranks
}

// podDeletionCost parses PodDeletionCostAnnotation (OM-9): an int32 in
// canonical decimal form; a missing or invalid value (leading "+", leading
// zeros, out of range, not a number) is 0.
func podDeletionCost(pod *v1.Pod) int32 {
	return parseDeletionCost(pod.Annotations[PodDeletionCostAnnotation])
}

func parseDeletionCost(s string) int32 {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0
		}
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

// phaseOrder is RS-14 rule 2: Pending < Unknown < Running, others as Pending.
func phaseOrder(p v1.PodPhase) int {
	switch p {
	case v1.PodUnknown:
		return 1
	case v1.PodRunning:
		return 2
	default:
		return 0
	}
}

// rankedPodsLess reports whether a should be deleted before b (RS-14 rules
// 1-9; the first rule that differs decides).
func rankedPodsLess(a, b rankedPod, now time.Time) bool {
	pa, pb := a.pod, b.pod
	if (pa.Spec.NodeName == "") != (pb.Spec.NodeName == "") { // 1. unassigned first
		return pa.Spec.NodeName == ""
	}
	if oa, ob := phaseOrder(pa.Status.Phase), phaseOrder(pb.Status.Phase); oa != ob { // 2
		return oa < ob
	}
	sinceA, readyA := rolloutstate.PodReadySince(pa)
	sinceB, readyB := rolloutstate.PodReadySince(pb)
	if readyA != readyB { // 3. not Ready first
		return !readyA
	}
	if a.cost != b.cost { // 4. lower deletion cost first
		return a.cost < b.cost
	}
	if a.rank != b.rank { // 5. more related pods on the node first
		return a.rank > b.rank
	}
	if readyA && readyB && !sinceA.Equal(sinceB) { // 6. more recently Ready first
		return newerOnLogScale(sinceA, sinceB, pa.UID, pb.UID, now)
	}
	if ra, rb := maxRestarts(pa), maxRestarts(pb); ra != rb { // 7. more restarts first
		return ra > rb
	}
	ta, tb := pa.CreationTimestamp.Time, pb.CreationTimestamp.Time
	if !ta.Equal(tb) { // 8. newer first
		return newerOnLogScale(ta, tb, pa.UID, pb.UID, now)
	}
	return false // 9. equal
}

// newerOnLogScale reports whether ta is "more recent" than tb for RS-14 rules
// 6 and 8: a zero time is the most recent; otherwise ages are compared as
// floor(log2(now − t in ns)) buckets, and an equal bucket falls back to the
// lexicographically smaller UID.
func newerOnLogScale(ta, tb time.Time, uidA, uidB types.UID, now time.Time) bool {
	if ta.IsZero() || tb.IsZero() {
		return ta.IsZero()
	}
	if now.IsZero() {
		return ta.After(tb)
	}
	ba, bb := logBucket(now.Sub(ta)), logBucket(now.Sub(tb))
	if ba == bb {
		return uidA < uidB
	}
	return ba < bb
}

// logBucket is floor(log2(d in ns)), with ages <= 1ns in bucket 0.
func logBucket(d time.Duration) int {
	if d <= 1 {
		return 0
	}
	return int(math.Log2(float64(d)))
}

// maxRestarts returns the highest restart count of the regular containers
// and, as a tie-break, of the restartable init (sidecar) containers, packed
// so that one int comparison applies both (RS-14 rule 7).
func maxRestarts(pod *v1.Pod) int64 {
	var regular, sidecar int32
	for _, cs := range pod.Status.ContainerStatuses {
		regular = max(regular, cs.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if sidecars[cs.Name] {
			sidecar = max(sidecar, cs.RestartCount)
		}
	}
	return int64(regular)<<32 | int64(uint32(sidecar))
}

// isPodActive reports whether pod counts as a replica: not Succeeded or
// Failed and not being deleted (AD-8, RS-4).
func isPodActive(pod *v1.Pod) bool {
	return pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed && pod.DeletionTimestamp == nil
}

// isPodReady reports whether pod has PodReady=True (rolloutstate.PodReadySince,
// the one readiness rule of the controllers, the rollout tooling and the
// simulator).
func isPodReady(pod *v1.Pod) bool {
	_, ready := rolloutstate.PodReadySince(pod)
	return ready
}

// podReadyTime returns when a Ready pod turned Ready (rolloutstate.PodReadySince);
// zero when it is not Ready or the time is unknown.
func podReadyTime(pod *v1.Pod) time.Time {
	if since, ready := rolloutstate.PodReadySince(pod); ready {
		return since
	}
	return time.Time{}
}
