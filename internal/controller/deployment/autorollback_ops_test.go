package deployment

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// kubectlUndoSkipped are the annotations `kubectl rollout undo` keeps from the Deployment (kubectl's
// annotationsToSkip); it replaces every other one with the ReplicaSet's.
var kubectlUndoSkipped = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"deployment.kubernetes.io/revision",
	"deployment.kubernetes.io/revision-history",
	"deployment.kubernetes.io/desired-replicas",
	"deployment.kubernetes.io/max-replicas",
	"deprecated.deployment.rollback.to",
}

// undo is a hand-run `kubectl rollout undo --to-revision=to` (0: the previous revision), then settle. As kubectl
// does, it finds the ReplicaSet by its revision annotation, skips when its template is already the Deployment's,
// and otherwise copies the template without pod-template-hash and replaces the Deployment's annotations with the
// ReplicaSet's, keeping only kubectlUndoSkipped. It reports whether it changed the Deployment.
func (w *ex2World) undo(to int64) bool {
	d := w.f.deployment()
	byRev, revs := w.byRevision()
	if to == 0 && len(revs) >= 2 {
		to = revs[len(revs)-2]
	}
	rs, ok := byRev[to]
	if !ok || rolloutstate.TemplatesEqualIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
		return false
	}
	undoTo(d, &rs)
	w.update(d)
	w.settle()
	return true
}

// undoTo changes d as `kubectl rollout undo` to rs does: rs's template without pod-template-hash, and d's
// annotations replaced with rs's but for kubectlUndoSkipped, which d keeps.
func undoTo(d *appsv1.Deployment, rs *appsv1.ReplicaSet) {
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	annotations := map[string]string{}
	for _, k := range kubectlUndoSkipped {
		if v, ok := d.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	for k, v := range rs.Annotations {
		if !slices.Contains(kubectlUndoSkipped, k) {
			annotations[k] = v
		}
	}
	d.Spec.Template, d.Annotations = *tmpl, annotations
}

// byRevision returns the Deployment's ReplicaSets by their revision annotation, and those revisions ascending.
func (w *ex2World) byRevision() (map[int64]appsv1.ReplicaSet, []int64) { return byRevision(w.f) }

// byRevision returns the fixture's ReplicaSets by their revision annotation, and those revisions ascending.
func byRevision(f *fixture) (map[int64]appsv1.ReplicaSet, []int64) {
	byRev := map[int64]appsv1.ReplicaSet{}
	var revs []int64
	for _, rs := range f.replicaSets() {
		if v, err := strconv.ParseInt(rs.Annotations[rolloutstate.RevisionAnnotation], 10, 64); err == nil {
			byRev[v], revs = rs, append(revs, v)
		}
	}
	slices.Sort(revs)
	return byRev, revs
}

// expire lets the progress deadline pass, settles, and checks EX-2 against the oracle: a Deployment stuck on a
// broken image that had not failed yet is rolled back to the image of the last complete revision, with the
// Warning event AutoRolledBack, or, when no revision completed, left failed with AutoRollbackSkipped; anything
// else is left as it was.
func (w *ex2World) expire() {
	f := w.f
	f.T.Helper()
	before := f.deployment()
	img, failed := image(before.Spec.Template), rolloutstate.DeadlineExceeded(&before.Status)
	f.Events()
	f.Clock.Step(ex2Deadline + time.Second)
	w.settle()
	after := image(f.deployment().Spec.Template)
	events := strings.Join(f.Events(), "\n")
	switch {
	case !broken(img) || failed:
		if after != img || strings.Contains(events, AutoRolledBack) {
			f.T.Fatalf("%s (failed before: %v) changed to %s; events:\n%s", img, failed, after, events)
		}
	case w.lastComplete == "":
		if after != img || !strings.Contains(events, AutoRollbackSkipped) {
			f.T.Fatalf("nothing completed, yet %s became %s; events:\n%s", img, after, events)
		}
	default:
		if after != w.lastComplete || !strings.Contains(events, "Warning "+AutoRolledBack) {
			f.T.Fatalf("%s failed: rolled to %s, want the last complete %s; events:\n%s", img, after, w.lastComplete, events)
		}
	}
}

// apply performs one user action of FuzzAutoRollback, decoded from op: a healthy image, a broken image, a hand
// undo (to the previous revision, or to one of the existing revisions picked by op's upper bits), or the deadline
// passing; each followed by settle.
func (w *ex2World) apply(op byte) {
	switch op % 4 {
	case 0:
		w.setImage(false)
	case 1:
		w.setImage(true)
	case 2:
		to := int64(0)
		if _, revs := w.byRevision(); op/4%2 == 1 && len(revs) > 0 {
			to = revs[int(op/8)%len(revs)]
		}
		w.undo(to)
	case 3:
		w.expire()
	}
}

// EX-2 after a hand undo (issue 44, item 1): revision 1 completes, revision 2 (broken) is rolled back
// automatically to revision 3, which completes; `kubectl rollout undo --to-revision=2` by hand makes the broken
// template revision 4. Its first status write must not record revision 4 complete (the Progressing condition
// still says NewReplicaSetAvailable from revision 3), and when its deadline passes it is rolled back to the
// last revision that really completed, though the undo dropped the Deployment's EX-2 bookkeeping.
func TestAutoRollbackAfterHandUndo(t *testing.T) {
	w := newEX2World(t, false)
	w.setImage(true) // revision 2, broken
	w.expire()       // rolled back to nginx:v0 as revision 3
	if got := w.f.deployment().Annotations[rolloutstate.CompleteRevisionAnnotation]; got != "3" {
		t.Fatalf("complete revision after the automatic rollback = %q, want 3", got)
	}
	if !w.undo(2) {
		t.Fatal("the undo to revision 2 changed nothing")
	}
	d := w.f.deployment()
	if img, rev := image(d.Spec.Template), d.Annotations[rolloutstate.RevisionAnnotation]; img != "nginx:v1-broken" || rev != "4" {
		t.Fatalf("after the undo: %s at revision %s, want nginx:v1-broken at 4", img, rev)
	}
	if got := d.Annotations[rolloutstate.CompleteRevisionAnnotation]; got != "3" {
		t.Errorf("complete revision shown after the undo = %q, want 3 (written again from the ReplicaSets)", got)
	}
	w.expire() // checks: rolled back to nginx:v0, the last complete revision
	if got := w.f.deployment().Annotations[rolloutstate.FailedRevisionAnnotation]; got != "4" {
		t.Errorf("failed revision = %q, want 4", got)
	}
}

// FuzzAutoRollback: over any sequence of image changes (healthy or broken), hand-run undos and progress
// deadlines passing, EX-2 never records a broken revision complete, never rolls back to a revision that did not
// complete, and never skips a rollback that should happen (ex2World.expire's oracle), whether or not the
// Deployment's first revision completes.
func FuzzAutoRollback(f *testing.F) {
	f.Add(false, []byte{1, 3, 2 + 4 + 8, 3})  // the scenario: broken, rolled back, undo to it, deadline
	f.Add(true, []byte{3, 0, 1, 3, 2, 3})     // nothing completes first; then a healthy one
	f.Add(false, []byte{0, 1, 2, 3, 1, 3, 2}) // undo to the previous revision between failures
	f.Add(false, []byte{1, 0, 1, 3, 2 + 4, 3, 1, 2, 3})
	f.Fuzz(func(t *testing.T, startBroken bool, ops []byte) {
		if len(ops) > 12 {
			ops = ops[:12]
		}
		w := newEX2World(t, startBroken)
		for _, op := range ops {
			w.apply(op)
		}
	})
}

// TestAutoRollbackRandomSequences is FuzzAutoRollback's property over 20 random sequences of 10 actions from a
// fixed seed, so that every `go test` run checks more than the fuzz seeds (each case is a subtest named by its
// start and actions, for rerunning one as a fuzz seed).
func TestAutoRollbackRandomSequences(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 2))
	for i := range 20 {
		startBroken := r.IntN(4) == 0
		ops := make([]byte, 10)
		for j := range ops {
			ops[j] = byte(r.IntN(256))
		}
		t.Run(fmt.Sprintf("%d/broken=%v/%v", i, startBroken, ops), func(t *testing.T) {
			w := newEX2World(t, startBroken)
			for _, op := range ops {
				w.apply(op)
			}
		})
	}
}
