package rolloutstate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations that say where a rollout stands, on a Deployment and its ReplicaSets (OM-1..OM-5, OM-7, EX-1, EX-2,
// EX-4; EX-3's is PodReplacementPolicyAnnotation). Every Deployment and ReplicaSet annotation key kubedeploy reads or writes is here.
const (
	// RevisionAnnotation holds the decimal int64 rollout sequence number on a Deployment and on each of its
	// ReplicaSets; missing means 0 (OM-1).
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation is the comma-separated list of revisions a ReplicaSet held before (OM-2, RV-6).
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas (replicas) when the Deployment controller last
	// wrote the ReplicaSet's size (OM-3).
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is the Deployment's spec.replicas + maxSurge (replicas) when the Deployment
	// controller last wrote the ReplicaSet's size (OM-4).
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// RollbackToAnnotation asks for a rollback to a revision; 0 means the previous one (OM-5, section 6).
	RollbackToAnnotation = appsv1.DeprecatedRollbackTo
	// LastAppliedConfigAnnotation is kubectl's client-side apply record, never copied to a ReplicaSet (OM-7).
	LastAppliedConfigAnnotation = v1.LastAppliedConfigAnnotation
	// RolloutPartitionAnnotation opts a RollingUpdate Deployment into a rollout partition (EX-1): its value, "N"
	// or "N%" (of spec.replicas, rounded down), is the most pods a rollout puts on the new template. The rolling
	// update proceeds as usual, within maxSurge and maxUnavailable, until the new ReplicaSet has that many
	// replicas, then holds: the old ReplicaSets keep the rest. Raising the value or removing the annotation
	// continues the rollout. Lowering it below the pods already updated does not roll them back (that is
	// `kubectl rollout undo`); the rollout holds where it is. Recreate Deployments ignore it.
	RolloutPartitionAnnotation = "kubedeploy.io/rollout-partition"
	// RollbackOnProgressDeadlineAnnotation opts a Deployment into automatic rollback (EX-2): with the value
	// "true", when its Progressing condition turns False with ProgressDeadlineExceeded, the controller rolls the
	// template back to the ReplicaSet of the last revision that completed, as `kubectl rollout undo` would. Any
	// other value, or none, keeps upstream's behaviour (the Deployment stays failed).
	RollbackOnProgressDeadlineAnnotation = "kubedeploy.io/rollback-on-progress-deadline"
	// FailedRevisionAnnotation is set by an automatic rollback (EX-2) to the revision it rolled back from. The
	// rollback's own rollout is the next revision; if that one exceeds its deadline too, it is left failed.
	FailedRevisionAnnotation = "kubedeploy.io/failed-revision"
	// CompleteRevisionAnnotation shows, on a Deployment opted into EX-2, the last revision whose rollout
	// completed: the highest CompletedAtRevisionAnnotation among its ReplicaSets, which is what an automatic
	// rollback reads. The controller writes it with a status write, so it costs no extra request, and writes it
	// again after `kubectl rollout undo` drops it. Only an older kubedeploy's Deployments, whose ReplicaSets carry
	// no CompletedAtRevisionAnnotation yet, are rolled back by this annotation alone.
	CompleteRevisionAnnotation = "kubedeploy.io/complete-revision"
	// CompletedAtRevisionAnnotation is set on a ReplicaSet of a Deployment opted into EX-2 to the Deployment
	// revision (decimal) at which that ReplicaSet's rollout last completed: the status the controller was about
	// to write for the Deployment's current generation counted every replica updated and available on it
	// (Complete). It is the ReplicaSet's own record, so a hand-run `kubectl rollout undo`, which replaces the
	// Deployment's annotations, cannot erase it; EX-0 leaves it on the ReplicaSet while the Deployment is opted
	// into EX-2 (and removes it with the policy once it is not), and the controller never copies it to another
	// ReplicaSet. An undo does copy it onto the Deployment, where nothing reads it and the
	// controller removes it with its next CompleteRevisionAnnotation write.
	CompletedAtRevisionAnnotation = "kubedeploy.io/completed-at-revision"
	// ScaleDownSpreadAnnotation opts a Deployment into scale-down that keeps its pods spread (EX-4): its value
	// is a node label key (a topologyKey such as "topology.kubernetes.io/zone"), or "template" for every
	// topologyKey of the pod template's topologySpreadConstraints, in their order. Among the pods that tie on
	// RS-14's first keys (unscheduled, phase, readiness, deletion cost), the ReplicaSet controller deletes from
	// the domain that holds the most pods of the Deployment. The Deployment controller carries the Deployment's
	// value (or its absence) onto each ReplicaSet with every scale it writes, so the ReplicaSet controller reads
	// it from the ReplicaSet it shrinks.
	ScaleDownSpreadAnnotation = "kubedeploy.io/scale-down-spread"
)

// ScaleDownSpreadFromTemplate is the kubedeploy.io/scale-down-spread value that spreads over the pod
// template's topologySpreadConstraints keys (EX-4).
const ScaleDownSpreadFromTemplate = "template"

// NoTopologyDomain is the topology domain of pods on nodes without the key, or on nodes not known (EX-4:
// "pods on nodes without the key form their own domain"). Label values never hold "<", so no node's value
// is mistaken for it.
const NoTopologyDomain = "<none>"

// ScaleDownSpreadKeys resolves a kubedeploy.io/scale-down-spread value found in annotations (a Deployment's or
// a ReplicaSet's) against the pod template tmpl (EX-4): the node label keys a scale-down spreads over, most
// significant first. It returns nil when the annotation is absent or empty (RS-14's ranking alone); the value
// itself when it is a valid label key; for "template", every distinct topologyKey of tmpl's
// topologySpreadConstraints in their order. An invalid key, or "template" on a template without constraints,
// is an error that says so.
func ScaleDownSpreadKeys(annotations map[string]string, tmpl *v1.PodTemplateSpec) ([]string, error) {
	value := annotations[ScaleDownSpreadAnnotation]
	switch value {
	case "":
		return nil, nil
	case ScaleDownSpreadFromTemplate:
		var keys []string
		for _, c := range tmpl.Spec.TopologySpreadConstraints {
			if c.TopologyKey != "" && !slices.Contains(keys, c.TopologyKey) {
				keys = append(keys, c.TopologyKey)
			}
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("%s is %q but the pod template has no topologySpreadConstraints", ScaleDownSpreadAnnotation, value)
		}
		return keys, nil
	}
	if errs := validation.IsQualifiedName(value); len(errs) > 0 {
		return nil, fmt.Errorf("%s %q is neither a node label key nor %q: %s",
			ScaleDownSpreadAnnotation, value, ScaleDownSpreadFromTemplate, strings.Join(errs, "; "))
	}
	return []string{value}, nil
}

// TopologyDomain returns the domain under key of a node with labels nodeLabels (nil for a node not known):
// its label value, or NoTopologyDomain (EX-4).
func TopologyDomain(nodeLabels map[string]string, key string) string {
	if v, ok := nodeLabels[key]; ok {
		return v
	}
	return NoTopologyDomain
}

// Progressing condition reasons that end or hold a rollout (ST-13, EX-1).
const (
	// NewReplicaSetAvailable is the Progressing=True reason once a rollout is complete (ST-13).
	NewReplicaSetAvailable = "NewReplicaSetAvailable"
	// ProgressDeadlineExceeded is the Progressing=False reason once a rollout made no progress for
	// progressDeadlineSeconds (ST-13).
	ProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// RolloutPartitioned is the Progressing=True reason while a rollout is held at its partition (EX-1); the
	// progress deadline does not run meanwhile.
	RolloutPartitioned = "RolloutPartitioned"
	// InvalidRolloutPartition is the Progressing=False reason while a RolloutPartitionAnnotation value that
	// does not parse holds a rollout where it is (EX-1); the progress deadline does not run meanwhile. It is
	// also the reason of the Warning event the Deployment controller emits about the value.
	InvalidRolloutPartition = "InvalidRolloutPartition"
)

// HasProgressDeadline reports whether d's progressDeadlineSeconds is set and not math.MaxInt32, which means no
// deadline (ST-13).
func HasProgressDeadline(d *appsv1.Deployment) bool {
	p := d.Spec.ProgressDeadlineSeconds
	return p != nil && *p != math.MaxInt32
}

// DeadlineExceeded reports whether status holds Progressing=False with reason ProgressDeadlineExceeded (ST-13).
func DeadlineExceeded(status *appsv1.DeploymentStatus) bool {
	c := Condition(status, appsv1.DeploymentProgressing)
	return c != nil && c.Status == v1.ConditionFalse && c.Reason == ProgressDeadlineExceeded
}

// RollsBackOnDeadline reports whether d is opted into automatic rollback (EX-2).
func RollsBackOnDeadline(d *appsv1.Deployment) bool {
	return d.Annotations[RollbackOnProgressDeadlineAnnotation] == "true"
}

// AutoRollback is what EX-2 decides for a failed Deployment: the ReplicaSet to roll back to, or why not.
type AutoRollback struct {
	// Failed is the revision that exceeded its deadline.
	Failed int64
	// Target is the ReplicaSet of the last complete revision; nil when Skipped says why there is none.
	Target  *appsv1.ReplicaSet
	Skipped string
}

// PlanAutoRollback decides EX-2 for d (opted in, its stored status failed for the current generation) given
// its new ReplicaSet newRS (nil: none) and its old ones: roll back to the ReplicaSet of the last complete
// revision, the one whose CompletedAtRevisionAnnotation is highest (LastComplete), unless the failed revision is
// the rollout of an automatic rollback (the revision after FailedRevisionAnnotation), no ReplicaSet ever
// completed, that ReplicaSet is newRS itself (the failing template is the last that completed, renumbered by a
// rollback, RV-2), or d's CompleteRevisionAnnotation names a later complete revision whose ReplicaSet is gone
// (revision history cleanup). Deployments whose ReplicaSets carry no CompletedAtRevisionAnnotation (recorded by
// an older kubedeploy) fall back to CompleteRevisionAnnotation and the ReplicaSet holding that revision in its
// revision or revision history. Skipped names the revision it means in each case. It is pure.
func PlanAutoRollback(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) AutoRollback {
	failed, _ := strconv.ParseInt(d.Annotations[RevisionAnnotation], 10, 64)
	p := AutoRollback{Failed: failed}
	if prev, err := strconv.ParseInt(d.Annotations[FailedRevisionAnnotation], 10, 64); err == nil && failed == prev+1 {
		p.Skipped = fmt.Sprintf("revision %d is the automatic rollback from revision %d and failed too; it is left failed", failed, prev)
		return p
	}
	last, rev := LastComplete(withNew(oldRSs, newRS))
	if last == nil {
		return planByAnnotation(d, newRS, oldRSs, p)
	}
	if recorded, err := strconv.ParseInt(d.Annotations[CompleteRevisionAnnotation], 10, 64); err == nil && recorded > rev {
		p.Skipped = fmt.Sprintf("the ReplicaSet of revision %d, the last that completed, no longer exists", recorded)
		return p
	}
	if newRS != nil && last.UID == newRS.UID {
		p.Skipped = fmt.Sprintf("revision %d, the last that completed, is the one that failed (now revision %d); there is no earlier complete revision to return to", rev, failed)
		return p
	}
	p.Target = last
	return p
}

// planByAnnotation is PlanAutoRollback for a Deployment whose ReplicaSets carry no CompletedAtRevisionAnnotation:
// the last complete revision is d's CompleteRevisionAnnotation, its ReplicaSet the old one holding that revision
// in its revision or revision history.
func planByAnnotation(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, p AutoRollback) AutoRollback {
	complete := d.Annotations[CompleteRevisionAnnotation]
	if complete == "" {
		p.Skipped = fmt.Sprintf("no complete revision is recorded (no ReplicaSet carries %s): none has completed since the Deployment was opted in", CompletedAtRevisionAnnotation)
		return p
	}
	if newRS != nil && holdsRevision(newRS, complete) || complete == d.Annotations[RevisionAnnotation] {
		p.Skipped = fmt.Sprintf("revision %s, the last that completed, is the one that failed (now revision %d); there is no earlier complete revision to return to", complete, p.Failed)
		return p
	}
	for _, rs := range oldRSs {
		if holdsRevision(rs, complete) {
			p.Target = rs
			return p
		}
	}
	p.Skipped = fmt.Sprintf("the ReplicaSet of revision %s, the last that completed, no longer exists", complete)
	return p
}

// LastComplete returns, among rss (any order; nil entries skipped), the ReplicaSet whose
// CompletedAtRevisionAnnotation is highest, and that revision: the last complete revision of their Deployment
// (EX-2). It returns nil and 0 when none carries a valid one (a positive decimal int64).
func LastComplete(rss []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, int64) {
	var last *appsv1.ReplicaSet
	var highest int64
	for _, rs := range rss {
		if rs == nil {
			continue
		}
		if rev, err := strconv.ParseInt(rs.Annotations[CompletedAtRevisionAnnotation], 10, 64); err == nil && rev > highest {
			last, highest = rs, rev
		}
	}
	return last, highest
}

// withNew returns old followed by newRS when it is not nil, in a new slice.
func withNew(old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, 0, len(old)+1)
	out = append(out, old...)
	if newRS != nil {
		out = append(out, newRS)
	}
	return out
}

// holdsRevision reports whether rs's revision, or its revision history, is rev (OM-1, OM-2).
func holdsRevision(rs *appsv1.ReplicaSet, rev string) bool {
	return rs.Annotations[RevisionAnnotation] == rev ||
		slices.Contains(strings.Split(rs.Annotations[RevisionHistoryAnnotation], ","), rev)
}

// AutoRollbackPending reports whether the controller is about to roll d back under EX-2: d is opted in, not
// paused, its status says ProgressDeadlineExceeded for the current generation, and a ReplicaSet of its last
// complete revision is among rss (d's ReplicaSets, any order; the new one, NewReplicaSet, is skipped).
// `rollout watch` keeps following such a Deployment instead of ending at the deadline.
func AutoRollbackPending(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) bool {
	if !RollsBackOnDeadline(d) || d.Spec.Paused || !HasProgressDeadline(d) ||
		d.Status.ObservedGeneration < d.Generation || !DeadlineExceeded(&d.Status) {
		return false
	}
	newRS := NewReplicaSet(d, rss)
	return PlanAutoRollback(d, newRS, OldReplicaSets(rss, newRS)).Target != nil
}

// AutoRolledBackFrom returns the revision an automatic rollback (EX-2) left when d's current revision is that
// rollback's rollout, i.e. the revision after FailedRevisionAnnotation; ok is false otherwise.
func AutoRolledBackFrom(d *appsv1.Deployment) (failed int64, ok bool) {
	failed, err := strconv.ParseInt(d.Annotations[FailedRevisionAnnotation], 10, 64)
	if err != nil {
		return 0, false
	}
	cur, err := strconv.ParseInt(d.Annotations[RevisionAnnotation], 10, 64)
	return failed, err == nil && cur == failed+1
}

// Condition returns a pointer to status's condition of type t (into status.Conditions), or nil: the one lookup
// of a Deployment condition the controllers, the CLI and the metrics share.
func Condition(status *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}
