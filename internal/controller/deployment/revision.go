package deployment

import (
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// skippedAnnotations are never copied from a Deployment to a ReplicaSet and
// are kept on the Deployment during a rollback (OM-8).
var skippedAnnotations = map[string]bool{
	rolloutstate.LastAppliedConfigAnnotation: true,
	rolloutstate.RevisionAnnotation:          true,
	rolloutstate.RevisionHistoryAnnotation:   true,
	rolloutstate.DesiredReplicasAnnotation:   true,
	rolloutstate.MaxReplicasAnnotation:       true,
	rolloutstate.RollbackToAnnotation:        true,
}

// revision returns the ReplicaSet's revision (OM-1): 0 when the annotation is
// missing or empty, an error when it is not a decimal int64.
func revision(rs *appsv1.ReplicaSet) (int64, error) {
	v := rs.Annotations[rolloutstate.RevisionAnnotation]
	if v == "" {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// maxRevision returns the highest parseable revision among rss, 0 if none
// (RV-2, RV-5). Unparseable revisions are skipped.
func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var highest int64
	for _, rs := range rss {
		if v, err := revision(rs); err == nil && v > highest {
			highest = v
		}
	}
	return highest
}

// lastRevision returns the second-highest revision among rss, or the highest
// when two ReplicaSets share it; 0 if there is none (RB-3).
func lastRevision(rss []*appsv1.ReplicaSet) int64 {
	var highest, second int64
	for _, rs := range rss {
		v, err := revision(rs)
		if err != nil {
			continue
		}
		if v >= highest {
			second, highest = highest, v
		} else if v > second {
			second = v
		}
	}
	return second
}

// copyDeploymentAnnotations copies every Deployment annotation outside the
// OM-8 skip list whose value is absent or different on rs, and reports
// whether rs changed. It never removes ReplicaSet annotations (RV-2a, RV-4).
// kubedeploy.io/ annotations are not copied with the others: they are the
// Deployment's, not a revision's (EX-0, setPolicyAnnotations).
func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	for k, v := range d.Annotations {
		if skippedAnnotations[k] || rolloutstate.IsKubedeployAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		if rs.Annotations == nil {
			rs.Annotations = map[string]string{}
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setPolicyAnnotations makes rs's kubedeploy.io/ annotations what EX-0
// wants: d's current policy annotations (EX-1..EX-4), nothing else of
// kubedeploy's (rolloutstate.SetPolicyAnnotations). Every ReplicaSet of d
// carries them (syncPolicyAnnotations), so that the ReplicaSet controller
// reads EX-4's value from the ReplicaSet it shrinks, and so that `kubectl
// rollout undo`, which replaces d's annotations with a ReplicaSet's, leaves
// d's policy as it is. It reports whether rs changed.
func setPolicyAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	var changed bool
	rs.Annotations, changed = rolloutstate.SetPolicyAnnotations(d, rs.Annotations)
	return changed
}

// rollbackAnnotations returns the Deployment annotations after rolling back to
// rs: the Deployment's own skip-listed annotations plus every non-skip-listed
// annotation of rs (RB-6), except that the kubedeploy.io/ ones stay the
// Deployment's, whatever rs carries (EX-0).
func rollbackAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) map[string]string {
	out := map[string]string{}
	for k, v := range d.Annotations {
		if skippedAnnotations[k] || rolloutstate.IsKubedeployAnnotation(k) {
			out[k] = v
		}
	}
	for k, v := range rs.Annotations {
		if !skippedAnnotations[k] && !rolloutstate.IsKubedeployAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

// appendRevisionHistory returns history with old appended, dropping the
// oldest entries until the result fits maxLen characters; if it still does
// not fit, history is returned unchanged (RV-6).
func appendRevisionHistory(history, old string, maxLen int) string {
	if history == "" {
		return old
	}
	entries := strings.Split(history, ",")
	total := len(history) + len(old) + 1
	start := 0
	for total > maxLen && start < len(entries) {
		total -= len(entries[start]) + 1
		start++
	}
	if total > maxLen {
		return history
	}
	return strings.Join(append(entries[start:len(entries):len(entries)], old), ",")
}

// setNewReplicaSetRevision updates, on rs (a copy of the new ReplicaSet), the
// copied Deployment annotations and the revision, appending the previous
// revision to the history when it is bumped (RV-2a..c). It reports whether
// anything changed; an unparseable non-empty RS revision reports false (RV-2).
func setNewReplicaSetRevision(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64) bool {
	changed := copyDeploymentAnnotations(d, rs)
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	oldValue, had := rs.Annotations[rolloutstate.RevisionAnnotation]
	var oldRevision int64
	if oldValue != "" {
		v, err := strconv.ParseInt(oldValue, 10, 64)
		if err != nil {
			return false
		}
		oldRevision = v
	}
	if oldRevision >= newRevision {
		return changed
	}
	rs.Annotations[rolloutstate.RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
	if had {
		rs.Annotations[rolloutstate.RevisionHistoryAnnotation] = appendRevisionHistory(
			rs.Annotations[rolloutstate.RevisionHistoryAnnotation], oldValue, maxRevisionHistoryLength)
	}
	return true
}

// replicasAnnotation parses the desired- or max-replicas annotation (OM-3,
// OM-4): an unsigned decimal no larger than MaxInt32. ok is false when the
// annotation is missing or does not parse.
func replicasAnnotation(rs *appsv1.ReplicaSet, key string) (value int32, ok bool) {
	s, found := rs.Annotations[key]
	if !found {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// replicasAnnotationsNeedUpdate reports whether rs's desired/max annotations
// differ (as "%d" strings) from desired and maxReplicas (RU-15).
func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[rolloutstate.DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[rolloutstate.MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// setReplicasAnnotations sets rs's desired/max annotations (OM-3, OM-4).
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[rolloutstate.DesiredReplicasAnnotation] = strconv.Itoa(int(desired))
	rs.Annotations[rolloutstate.MaxReplicasAnnotation] = strconv.Itoa(int(maxReplicas))
}

// rollbackTo returns the revision requested by rolloutstate.RollbackToAnnotation and true,
// or false when the annotation is absent, empty or not an int64 (OM-5, RB-1).
func rollbackTo(d *appsv1.Deployment) (int64, bool) {
	s := d.Annotations[rolloutstate.RollbackToAnnotation]
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}
