package rolloutstate

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// PodReplacementPolicyAnnotation opts a Deployment into a pod-level surge bound (EX-3, IM-7). With the value
// PodReplacementTerminationComplete, a rolling update grows the new ReplicaSet only while the live and
// terminating pods of all the Deployment's ReplicaSets stay within spec.replicas + maxSurge: the behaviour
// KEP-3973 describes for podReplacementPolicy: TerminationComplete, which apps/v1 does not have in Kubernetes
// 1.36. No annotation keeps upstream's behaviour (the bound holds for ReplicaSet specs only).
const PodReplacementPolicyAnnotation = "kubedeploy.io/pod-replacement-policy"

// PodReplacementTerminationComplete is the PodReplacementPolicyAnnotation value that waits for terminating pods
// to be gone (KEP-3973's name).
const PodReplacementTerminationComplete = "TerminationComplete"

// KubedeployAnnotationPrefix starts every annotation key that is kubedeploy's: the policies (PolicyAnnotations)
// and the controller's bookkeeping (CompleteRevisionAnnotation, FailedRevisionAnnotation on a Deployment,
// CompletedAtRevisionAnnotation on a ReplicaSet).
const KubedeployAnnotationPrefix = "kubedeploy.io/"

// keepsRecord reports whether key is a kubedeploy.io/ annotation that records something of the ReplicaSet carrying
// it and that EX-0 leaves on the ReplicaSets of d: CompletedAtRevisionAnnotation while d is opted into EX-2
// (RollsBackOnDeadline). A Deployment taken out of EX-2 loses the records with its policy, so that a later
// `kubectl rollout undo` copies none onto it.
func keepsRecord(d *appsv1.Deployment, key string) bool {
	return key == CompletedAtRevisionAnnotation && TracksCompletion(d)
}

// TracksCompletion reports whether the controller records on d's ReplicaSets the revisions whose rollouts
// completed (CompletedAtRevisionAnnotation): for EX-2's automatic rollback (RollsBackOnDeadline) and for EX-5's
// abort (HasRolloutSteps), both of which roll back to the last complete revision.
func TracksCompletion(d *appsv1.Deployment) bool {
	return RollsBackOnDeadline(d) || HasRolloutSteps(d)
}

// PolicyAnnotations are the keys a user sets on a Deployment to opt into kubedeploy's extensions (EX-1..EX-5).
// They are the Deployment's, not a revision's (EX-0): every ReplicaSet of the Deployment carries the
// Deployment's current value of each (PolicyAnnotationsDiffer), so that `kubectl rollout undo`, which replaces
// the Deployment's annotations with the target ReplicaSet's, leaves the policy as it is.
var PolicyAnnotations = []string{
	RolloutPartitionAnnotation,
	RollbackOnProgressDeadlineAnnotation,
	PodReplacementPolicyAnnotation,
	ScaleDownSpreadAnnotation,
	RolloutStepsAnnotation,
}

// IsKubedeployAnnotation reports whether key is one of kubedeploy's (KubedeployAnnotationPrefix).
func IsKubedeployAnnotation(key string) bool {
	return strings.HasPrefix(key, KubedeployAnnotationPrefix)
}

// SetPolicyAnnotations makes the kubedeploy.io/ annotations of a ReplicaSet, given as its annotations map
// (modified in place; nil is replaced when something is added), what EX-0 wants for a ReplicaSet of d: each
// of d's PolicyAnnotations copied, every other kubedeploy.io/ key (a policy d no longer has, bookkeeping
// copied there by an older kubedeploy) removed, except the ReplicaSet's own record (CompletedAtRevisionAnnotation)
// while d is opted into EX-2.
// It returns the map and whether it changed.
func SetPolicyAnnotations(d *appsv1.Deployment, annotations map[string]string) (map[string]string, bool) {
	changed := false
	for k, have := range annotations {
		want, ok := d.Annotations[k]
		if IsKubedeployAnnotation(k) && !keepsRecord(d, k) && (!ok || !isPolicyAnnotation(k) || want != have) {
			delete(annotations, k)
			changed = true
		}
	}
	for _, k := range PolicyAnnotations {
		want, ok := d.Annotations[k]
		if _, have := annotations[k]; !ok || have {
			continue
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = want
		changed = true
	}
	return annotations, changed
}

// PolicyAnnotationsDiffer reports whether SetPolicyAnnotations would change a ReplicaSet with annotations
// (EX-0): it allocates nothing.
func PolicyAnnotationsDiffer(d *appsv1.Deployment, annotations map[string]string) bool {
	for k, have := range annotations {
		if want, ok := d.Annotations[k]; IsKubedeployAnnotation(k) && !keepsRecord(d, k) && (!ok || !isPolicyAnnotation(k) || want != have) {
			return true
		}
	}
	for _, k := range PolicyAnnotations {
		if _, ok := d.Annotations[k]; ok {
			if _, have := annotations[k]; !have {
				return true
			}
		}
	}
	return false
}

func isPolicyAnnotation(k string) bool {
	for _, p := range PolicyAnnotations {
		if p == k {
			return true
		}
	}
	return false
}

// PolicyError is a kubedeploy.io/ policy annotation whose value kubedeploy cannot use: which annotation, its
// value, and what it wants instead. Its Error is one line.
type PolicyError struct {
	Annotation string
	Value      string
	// Want says which values are valid, e.g. `a whole number of pods ("5") or a percentage of spec.replicas
	// ("25%")`.
	Want string
	// Effect says what kubedeploy does meanwhile, e.g. "the rollout holds where it is".
	Effect string
	// Fault, when set, says what is wrong instead of Value and Want: for a value too long to quote, such as
	// RolloutStepsAnnotation's list (StepsError).
	Fault string
}

func (e *PolicyError) Error() string {
	if e.Fault != "" {
		return e.Fault
	}
	return fmt.Sprintf("%s %q: want %s", e.Annotation, e.Value, e.Want)
}

// PolicyErrors returns every policy annotation of d (EX-1..EX-3) whose value is not one kubedeploy uses, in
// PolicyAnnotations' order; nil when all are valid or absent. EX-4's value needs the pod template and nodes
// (ScaleDownSpreadKeys says when it is invalid). A partition on a Recreate Deployment is ignored, so is not
// reported.
func PolicyErrors(d *appsv1.Deployment) []*PolicyError {
	var errs []*PolicyError
	if _, err := PartitionOf(d); err != nil {
		errs = append(errs, err)
	}
	if v, ok := d.Annotations[RollbackOnProgressDeadlineAnnotation]; ok && v != "true" && v != "false" {
		errs = append(errs, &PolicyError{Annotation: RollbackOnProgressDeadlineAnnotation, Value: v,
			Want: `"true" or "false"`, Effect: "automatic rollback is off"})
	}
	if v, ok := d.Annotations[PodReplacementPolicyAnnotation]; ok && v != PodReplacementTerminationComplete {
		errs = append(errs, &PolicyError{Annotation: PodReplacementPolicyAnnotation, Value: v,
			Want: fmt.Sprintf("%q", PodReplacementTerminationComplete), Effect: "upstream's replacement applies"})
	}
	if _, err := ScaleDownSpreadKeys(d.Annotations, &d.Spec.Template); err != nil {
		errs = append(errs, &PolicyError{Annotation: ScaleDownSpreadAnnotation, Value: d.Annotations[ScaleDownSpreadAnnotation],
			Want:   fmt.Sprintf("a node label key or %q (with topologySpreadConstraints)", ScaleDownSpreadFromTemplate),
			Effect: "scale-downs rank pods as upstream does"})
	}
	if _, err := StepsOf(d); err != nil {
		errs = append(errs, &PolicyError{Annotation: RolloutStepsAnnotation, Value: d.Annotations[RolloutStepsAnnotation],
			Fault: err.Error(), Effect: StepsEffect})
	}
	return errs
}

// partitionWant is what RolloutPartitionAnnotation accepts.
const partitionWant = `a whole number of pods ("5") or a percentage of spec.replicas ("25%")`

// ParsePartition returns the number of pods, in [0, replicas], that partition value v allows on the new
// template of a Deployment of replicas replicas (EX-1): "N" is N, capped at replicas; "N%" is N percent of
// replicas rounded down, capped at replicas. N is a decimal integer ≥ 0; anything else (a sign, spaces, a
// fraction, an empty string) is a *PolicyError naming the value. An overflow counts as more than any
// Deployment has. replicas < 0 counts as 0.
func ParsePartition(v string, replicas int32) (int32, error) {
	replicas = max(replicas, 0)
	digits, percent := strings.CutSuffix(v, "%")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, &PolicyError{Annotation: RolloutPartitionAnnotation, Value: v, Want: partitionWant, Effect: "the rollout holds where it is"}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		n = math.MaxInt64 // only an overflow gets here
	}
	if percent {
		if n >= 100 {
			return replicas, nil
		}
		return int32(n * int64(replicas) / 100), nil
	}
	return int32(min(n, int64(replicas))), nil
}

// Partition is a Deployment's EX-1 partition, read by PartitionOf. Set is true for a RollingUpdate Deployment
// with RolloutPartitionAnnotation (a Recreate Deployment ignores it); Pods is then the partition in pods, in
// [0, Replicas], and 0 for a value that does not parse (hold where it is); Replicas is d.spec.replicas. The
// zero value is no partition.
type Partition struct {
	Set      bool
	Pods     int32
	Replicas int32
}

// PartitionOf reads d's partition (EX-1). The error is the *PolicyError of an invalid value; the Partition
// returned with it holds at 0 pods, i.e. where the rollout is.
func PartitionOf(d *appsv1.Deployment) (Partition, *PolicyError) {
	p := Partition{Replicas: Replicas(d)}
	v, ok := d.Annotations[RolloutPartitionAnnotation]
	if !ok || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return p, nil
	}
	p.Set = true
	pods, err := ParsePartition(v, p.Replicas)
	p.Pods = pods
	if err != nil {
		return p, err.(*PolicyError)
	}
	return p, nil
}

// Limit returns the most replicas the rolling update may give the new ReplicaSet newRS (nil: none yet), in
// replicas (EX-1): the partition, but never less than newRS already has and never more than d.spec.replicas.
// Without a partition, or when no ReplicaSet of allRSs other than newRS has replicas (a first rollout has no
// old template to keep pods on), there is no limit: math.MaxInt32.
func (p Partition) Limit(newRS *appsv1.ReplicaSet, allRSs []*appsv1.ReplicaSet) int32 {
	if !p.Set {
		return math.MaxInt32
	}
	var old int32
	for _, rs := range allRSs {
		if rs != nil && (newRS == nil || rs.UID != newRS.UID) {
			old += ReplicaSetReplicas(rs)
		}
	}
	return p.LimitFor(ReplicaSetReplicas(newRS), old)
}

// LimitFor is Limit from the sizes alone: the new ReplicaSet at newReplicas and the old ones at oldReplicas in
// total, all in replicas.
func (p Partition) LimitFor(newReplicas, oldReplicas int32) int32 {
	if !p.Set || oldReplicas == 0 {
		return math.MaxInt32
	}
	return min(p.Replicas, max(p.Pods, newReplicas))
}

// HeldAtPartition reports whether status shows d's rollout held by its partition (EX-1), limit being
// Partition.Limit: limit < d.spec.replicas, the new ReplicaSet sized at limit with every one of its pods
// updated and available, the old ones holding the rest (status.replicas = d.spec.replicas), for the current
// generation. The rollout has then done all the partition allows; pods kept on the old template may be
// unavailable (KeptBackUnavailable counts them): they are the old template's, and no step of this rollout
// would make them available. It is the partitioned counterpart of Complete (ST-9).
func HeldAtPartition(d *appsv1.Deployment, status *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, limit int32) bool {
	return limit < Replicas(d) && newRS != nil &&
		ReplicaSetReplicas(newRS) == limit && newRS.Status.AvailableReplicas >= limit &&
		status.UpdatedReplicas == limit &&
		status.Replicas == Replicas(d) &&
		status.AvailableReplicas >= limit &&
		status.ObservedGeneration >= d.Generation
}

// KeptBackUnavailable returns how many of d's replicas that a held rollout keeps on the old template are
// unavailable, from status: d.spec.replicas − status.availableReplicas, at least 0 (EX-1).
func KeptBackUnavailable(d *appsv1.Deployment, status *appsv1.DeploymentStatus) int32 {
	return max(0, Replicas(d)-status.AvailableReplicas)
}
