package deployment

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// RollbackOnProgressDeadlineAnnotation opts a Deployment into automatic
// rollback (EX-2): with the value "true", when its Progressing condition
// turns False with ProgressDeadlineExceeded, the controller rolls the
// template back to the ReplicaSet of the last revision that completed, as
// `kubectl rollout undo` would. Any other value, or none, keeps upstream's
// behaviour (the Deployment stays failed).
const RollbackOnProgressDeadlineAnnotation = "kubedeploy.io/rollback-on-progress-deadline"

// FailedRevisionAnnotation is set by an automatic rollback (EX-2) to the
// revision it rolled back from. The rollback's own rollout is the next
// revision; if that one exceeds its deadline too, it is left failed.
const FailedRevisionAnnotation = "kubedeploy.io/failed-revision"

// CompleteRevisionAnnotation records, on a Deployment opted into EX-2, the
// last revision whose rollout completed (Progressing reason
// NewReplicaSetAvailable): the revision an automatic rollback returns to.
// The controller writes it with the status write that reports the
// completion, so it costs no extra request.
const CompleteRevisionAnnotation = "kubedeploy.io/complete-revision"

// Event reasons of EX-2.
const (
	// AutoRolledBack is the Warning event reason of an automatic rollback;
	// its message names both revisions.
	AutoRolledBack = "DeploymentAutoRolledBack"
	// AutoRollbackSkipped is the Warning event reason when an opted-in
	// Deployment exceeded its deadline but is not rolled back: no revision
	// completed before, its ReplicaSet is gone, or the failed rollout was
	// itself an automatic rollback.
	AutoRollbackSkipped = "DeploymentAutoRollbackSkipped"
)

// kubedeployAnnotationPrefix marks the annotations that are kubedeploy's
// policy and bookkeeping on a Deployment: an automatic rollback keeps the
// Deployment's, whatever the target ReplicaSet carries.
const kubedeployAnnotationPrefix = "kubedeploy.io/"

// rollsBackOnDeadline reports whether d is opted into EX-2.
func rollsBackOnDeadline(d *appsv1.Deployment) bool {
	return d.Annotations[RollbackOnProgressDeadlineAnnotation] == "true"
}

// deadlineExceeded reports whether status holds Progressing=False with
// reason ProgressDeadlineExceeded (ST-13).
func deadlineExceeded(status *appsv1.DeploymentStatus) bool {
	c := getCondition(status, appsv1.DeploymentProgressing)
	return c != nil && c.Status == v1.ConditionFalse && c.Reason == ProgressDeadlineExceeded
}

// recordCompleteRevision sets CompleteRevisionAnnotation on d to its current
// revision when d is opted into EX-2 and status reports its rollout
// complete (Progressing reason NewReplicaSetAvailable for the current
// generation), and reports whether d's annotations changed.
func recordCompleteRevision(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	if !rollsBackOnDeadline(d) {
		return false
	}
	c := getCondition(status, appsv1.DeploymentProgressing)
	rev := d.Annotations[RevisionAnnotation]
	if c == nil || c.Reason != NewReplicaSetAvailable || status.ObservedGeneration < d.Generation || rev == "" ||
		d.Annotations[CompleteRevisionAnnotation] == rev {
		return false
	}
	d.Annotations[CompleteRevisionAnnotation] = rev
	return true
}

// autoRollbackPlan is what EX-2 decides for a failed Deployment: the
// ReplicaSet to roll back to, or why not.
type autoRollbackPlan struct {
	// failed is the revision that exceeded its deadline.
	failed int64
	// target is the ReplicaSet of the last complete revision; nil when
	// skipped says why there is none.
	target  *appsv1.ReplicaSet
	skipped string
}

// planAutoRollback decides EX-2 for d (opted in, its stored status failed
// for the current generation) given its old ReplicaSets: roll back to the
// old ReplicaSet whose revision, or revision history, holds the last
// complete revision, unless the failed revision is the rollout of an
// automatic rollback (the revision after FailedRevisionAnnotation) or there
// is no such ReplicaSet. It is pure.
func planAutoRollback(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) autoRollbackPlan {
	failed, _ := strconv.ParseInt(d.Annotations[RevisionAnnotation], 10, 64)
	p := autoRollbackPlan{failed: failed}
	if prev, err := strconv.ParseInt(d.Annotations[FailedRevisionAnnotation], 10, 64); err == nil && failed == prev+1 {
		p.skipped = fmt.Sprintf("revision %d is the automatic rollback from revision %d and failed too; it is left failed", failed, prev)
		return p
	}
	complete := d.Annotations[CompleteRevisionAnnotation]
	if complete == "" || complete == d.Annotations[RevisionAnnotation] {
		p.skipped = "no earlier revision of it completed"
		return p
	}
	for _, rs := range oldRSs {
		if rs.Annotations[RevisionAnnotation] == complete ||
			slices.Contains(strings.Split(rs.Annotations[RevisionHistoryAnnotation], ","), complete) {
			p.target = rs
			return p
		}
	}
	p.skipped = fmt.Sprintf("the ReplicaSet of revision %s, the last that completed, no longer exists", complete)
	return p
}

// autoRollbackDue reports whether this sync should act on EX-2: d opted in,
// not paused, its stored status failed for the current generation.
func (sc *syncContext) autoRollbackDue() bool {
	d := sc.d
	return rollsBackOnDeadline(d) && !d.Spec.Paused && hasProgressDeadline(d) &&
		d.Status.ObservedGeneration >= d.Generation && deadlineExceeded(&d.Status)
}

// autoRollback rolls d back as planAutoRollback decides (EX-2): it copies
// the target ReplicaSet's template (without pod-template-hash) and
// annotations into d as `kubectl rollout undo` does (RB-5, RB-6), except
// that d keeps its own kubedeploy.io/ annotations, records the failed
// revision in FailedRevisionAnnotation, patches d, emits the Warning event
// AutoRolledBack and starts the rollback's progress deadline afresh (so
// `kubectl rollout status` follows the new rollout instead of reporting the
// old failure). It reports whether it rolled back; a skipped rollback
// writes nothing (the event is emitted when the deadline is first
// exceeded, see syncRolloutStatus). It returns the API errors.
func (sc *syncContext) autoRollback(ctx context.Context) (bool, error) {
	p := planAutoRollback(sc.d, sc.oldRSs)
	if p.target == nil {
		return false, nil
	}
	target, _ := revision(p.target)
	err := sc.patchDeploymentToTemplateOf(ctx, p.target, func(d *appsv1.Deployment) {
		annotations := rollbackAnnotations(d, p.target)
		for k := range annotations {
			if strings.HasPrefix(k, kubedeployAnnotationPrefix) {
				delete(annotations, k)
			}
		}
		for k, v := range d.Annotations {
			if strings.HasPrefix(k, kubedeployAnnotationPrefix) {
				annotations[k] = v
			}
		}
		annotations[FailedRevisionAnnotation] = strconv.FormatInt(p.failed, 10)
		d.Annotations = annotations
	})
	if err != nil {
		return false, fmt.Errorf("rolling back to revision %d: %w", target, err)
	}
	msg := fmt.Sprintf("Rolled back deployment %q from revision %d, which exceeded its progress deadline, to revision %d (ReplicaSet %q)",
		sc.d.Name, p.failed, target, p.target.Name)
	sc.c.recorder.Event(sc.d, v1.EventTypeWarning, AutoRolledBack, msg)
	sc.logger.Info("Rolled back a deployment that exceeded its progress deadline", "failedRevision", p.failed, "revision", target, "replicaSet", p.target.Name)
	setCondition(&sc.d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdated, msg+".", sc.now))
	if err := sc.updateStatus(ctx); err != nil {
		return true, fmt.Errorf("restarting the progress deadline after rolling back: %w", err)
	}
	return true, nil
}

// autoRollbackSkippedEvent emits AutoRollbackSkipped when d, opted into
// EX-2, has just exceeded its deadline (prev did not, status does) and will
// not be rolled back.
func (sc *syncContext) autoRollbackSkippedEvent(prev, status *appsv1.DeploymentStatus) {
	if !rollsBackOnDeadline(sc.d) || deadlineExceeded(prev) || !deadlineExceeded(status) {
		return
	}
	if p := planAutoRollback(sc.d, sc.oldRSs); p.target == nil {
		sc.c.recorder.Eventf(sc.d, v1.EventTypeWarning, AutoRollbackSkipped, "Not rolling back automatically: %s", p.skipped)
	}
}

// AutoRollbackPending reports whether the controller is about to roll d
// back under EX-2: d is opted in, not paused, its status says
// ProgressDeadlineExceeded for the current generation, and a ReplicaSet of
// its last complete revision is among rss (d's ReplicaSets, any order; the
// new one is skipped). `rollout watch` keeps following such a Deployment
// instead of ending at the deadline.
func AutoRollbackPending(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) bool {
	if !rollsBackOnDeadline(d) || d.Spec.Paused || !hasProgressDeadline(d) ||
		d.Status.ObservedGeneration < d.Generation || !deadlineExceeded(&d.Status) {
		return false
	}
	newRS := findNewReplicaSet(nil, d, rss)
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil || rs.UID != newRS.UID {
			old = append(old, rs)
		}
	}
	return planAutoRollback(d, old).target != nil
}

// AutoRolledBackFrom returns the revision an automatic rollback (EX-2) left
// when d's current revision is that rollback's rollout, i.e. the revision
// after FailedRevisionAnnotation; ok is false otherwise.
func AutoRolledBackFrom(d *appsv1.Deployment) (failed int64, ok bool) {
	failed, err := strconv.ParseInt(d.Annotations[FailedRevisionAnnotation], 10, 64)
	if err != nil {
		return 0, false
	}
	cur, err := strconv.ParseInt(d.Annotations[RevisionAnnotation], 10, 64)
	return failed, err == nil && cur == failed+1
}
