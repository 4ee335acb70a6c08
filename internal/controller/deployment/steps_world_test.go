package deployment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// stepsWorld runs the Deployment controller's real syncs over the fixture's fake API server for a Deployment
// with rollout steps (EX-5), through user actions: image changes (healthy or broken), scales, hand-run `kubectl
// rollout undo`, promotes, aborts, time passing and new step lists. Like ex2World it stands in for the
// ReplicaSet controller and the kubelets (a ReplicaSet's status shows its spec.replicas, all available unless
// its image ends in "broken") and for the API server's generation. After every sync it checks EX-5's
// invariants (check).
type stepsWorld struct {
	f        *fixture
	template v1.PodTemplateSpec
	images   int
	// surge and unavailable are the Deployment's maxSurge and maxUnavailable, in pods at its current replicas.
	surge, unavailable int32
	// scaled is set by a scale until the next settle: the bounds are not checked across a change of replicas.
	scaled bool
	// log lists the actions taken, for failure messages.
	log []string
}

// newStepsWorld returns the world with Deployment "nginx" of replicas replicas at nginx:v0, settled (a first
// rollout: no steps), with steps v.
func newStepsWorld(t *testing.T, replicas int32, surge, unavailable intstr.IntOrString, v string) *stepsWorld {
	d := newDeployment(replicas, surge, unavailable)
	d.Spec.Template = podTemplate("nginx:v0")
	d.Spec.RevisionHistoryLimit = ptr.To[int32](100)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Annotations = map[string]string{rolloutstate.RolloutStepsAnnotation: v}
	w := &stepsWorld{f: newFixture(t, d)}
	w.f.Client.PrependReactor("create", "replicasets", func(action core.Action) (bool, runtime.Object, error) {
		rs := action.(core.CreateAction).GetObject().(*appsv1.ReplicaSet)
		rs.UID, rs.Generation = types.UID(rs.Name+"-uid"), 1
		return false, nil, nil
	})
	w.template = d.Spec.Template
	w.settle()
	if d := w.f.deployment(); !rolloutstate.Complete(d, &d.Status) {
		t.Fatalf("the first rollout did not complete: %+v", d.Status)
	}
	return w
}

func (w *stepsWorld) fatalf(format string, args ...any) {
	w.f.T.Helper()
	w.f.T.Fatalf("%s\nafter: %s", fmt.Sprintf(format, args...), strings.Join(w.log, ", "))
}

// settle syncs and runs the ReplicaSets until a round changes nothing, checking the invariants after each sync.
func (w *stepsWorld) settle() {
	f := w.f
	f.T.Helper()
	for range 80 {
		f.observe()
		before := f.deployment()
		newBefore := w.newReplicas(before)
		_, err := f.sync()
		if err != nil && !errors.Is(err, runner.ErrConflict) {
			w.fatalf("sync: %v", err)
		}
		writes := len(f.Writes())
		w.check(before, newBefore)
		changed := w.runReplicaSets()
		w.bumpGeneration()
		if err == nil && writes == 0 && !changed {
			w.scaled = false
			return
		}
	}
	w.fatalf("the Deployment did not settle in 80 rounds: %+v", f.deployment().Status)
}

// newReplicas returns the spec.replicas of d's new ReplicaSet (the one with its template), -1 for none.
func (w *stepsWorld) newReplicas(d *appsv1.Deployment) int32 {
	for _, rs := range w.f.replicaSets() {
		if rolloutstate.TemplatesEqualIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			return ptr.Deref(rs.Spec.Replicas, 1)
		}
	}
	return -1
}

// check fails the test when the sync from before broke EX-5: the spec changed other than by an abort's
// rollback; the new ReplicaSet grew past the current step's pods (it may keep what it had); the ReplicaSets
// went past maxSurge or below maxUnavailable's floor (not across a scale).
func (w *stepsWorld) check(before *appsv1.Deployment, newBefore int32) {
	w.f.T.Helper()
	after := w.f.deployment()
	rev, _ := strconv.ParseInt(before.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
		aborted := rolloutstate.AbortRequested(before, rev) || analysisFailedIn(after, rev)
		if !aborted || after.Annotations[rolloutstate.FailedRevisionAnnotation] != strconv.FormatInt(rev, 10) {
			w.fatalf("the controller changed the spec without an abort of revision %d:\n%+v\n%+v", rev, before.Spec, after.Spec)
		}
		return
	}
	w.checkRecorded(after, newBefore)
	replicas := rolloutstate.Replicas(after)
	if limit, _, ok := w.stepLimit(after); ok && w.newReplicas(after) > max(limit, newBefore) {
		w.fatalf("the new ReplicaSet went to %d (from %d), past its step's %d pods", w.newReplicas(after), newBefore, limit)
	}
	if w.scaled {
		return
	}
	var total, available int32
	for _, rs := range w.f.replicaSets() {
		n := ptr.Deref(rs.Spec.Replicas, 1)
		total += n
		available += min(n, rs.Status.AvailableReplicas)
	}
	if total > replicas+w.surge {
		w.fatalf("%d pods allowed, past %d + maxSurge %d", total, replicas, w.surge)
	}
	if floor := replicas - w.unavailable; available < floor && available < w.availableBefore(before) {
		w.fatalf("%d pods available, below %d − maxUnavailable %d", available, replicas, w.unavailable)
	}
}

// analysisFailedIn reports whether d records a Failed analysis run of revision rev (EX-6: the sync aborts it).
func analysisFailedIn(d *appsv1.Deployment, rev int64) bool {
	rec := rolloutstate.AnalysisRecordOf(d, rev)
	for _, run := range rec.Runs {
		if run.Phase == rolloutstate.AnalysisFailed {
			return true
		}
	}
	return false
}

// checkRecorded fails the test when steps run d's rollout to a new ReplicaSet that existed before the sync
// (newBefore ≥ 0; the sync that creates it sizes it by step 0 and records it next) but the sync left no record
// of its step for that revision.
func (w *stepsWorld) checkRecorded(d *appsv1.Deployment, newBefore int32) {
	w.f.T.Helper()
	_, rev, ok := w.stepLimit(d)
	if !ok || d.Spec.Paused {
		return
	}
	if st, ok := rolloutstate.StepStateOf(d); newBefore >= 0 && rev > 0 && (!ok || st.Revision != rev) {
		w.fatalf("revision %d runs through steps with no record of its step (%s %q)", rev, rolloutstate.RolloutStepAnnotation, d.Annotations[rolloutstate.RolloutStepAnnotation])
	}
}

// availableBefore is what was available before the sync (a rollout may start below the floor, e.g. on a broken
// image, and must not go further down).
func (w *stepsWorld) availableBefore(before *appsv1.Deployment) int32 {
	return before.Status.AvailableReplicas
}

// stepLimit returns the pods the current step of d's rollout allows on the new template, when steps hold it:
// the recorded step's when it is for the new ReplicaSet's revision, else step 0's (a new rollout); and that
// revision (0 while there is no new ReplicaSet).
func (w *stepsWorld) stepLimit(d *appsv1.Deployment) (int32, int64, bool) {
	steps, invalid := rolloutstate.StepsOf(d)
	var newRS *appsv1.ReplicaSet
	var all []*appsv1.ReplicaSet
	for _, rs := range w.f.replicaSets() {
		all = append(all, &rs)
		if rolloutstate.TemplatesEqualIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = &rs
		}
	}
	rev := int64(0)
	if newRS != nil {
		rev, _ = strconv.ParseInt(newRS.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	}
	if steps == nil || invalid != nil || !rolloutstate.StepsApply(d, rev, newRS, all) {
		return 0, rev, false
	}
	step := 0
	if st, ok := rolloutstate.StepStateOf(d); ok && st.Revision == rev {
		step = st.Step
	}
	if step >= len(steps) {
		return 0, rev, false
	}
	return rolloutstate.StepPods(steps.WeightAt(step), rolloutstate.Replicas(d)), rev, true
}

// runReplicaSets is runReplicaSetsAsPods.
func (w *stepsWorld) runReplicaSets() bool { return runReplicaSetsAsPods(w.f) }

// bumpGeneration is bumpGeneration of the world's template (an abort's rollback changes it).
func (w *stepsWorld) bumpGeneration() { bumpGeneration(w.f, &w.template) }

// update writes d as a user would (a spec change bumps the generation) and settles.
func (w *stepsWorld) update(d *appsv1.Deployment, what string) {
	w.log = append(w.log, what)
	if !equality.Semantic.DeepEqual(d.Spec, w.f.deployment().Spec) {
		d.Generation++
	}
	w.template = d.Spec.Template
	if _, err := w.f.Client.AppsV1().Deployments("ns").Update(w.f.Ctx, d, metav1.UpdateOptions{}); err != nil {
		w.f.T.Fatal(err)
	}
	w.settle()
}

// setFencepostPods sets surge and unavailable from the Deployment's current replicas.
func (w *stepsWorld) setFencepostPods() {
	f, err := rolloutstate.FencepostsOf(w.f.deployment())
	if err != nil {
		w.f.T.Fatal(err)
	}
	w.surge, w.unavailable = f.MaxSurge, f.MaxUnavailable
}

func (w *stepsWorld) setImage(isBroken bool) {
	w.images++
	img := "nginx:v" + strconv.Itoa(w.images)
	if isBroken {
		img += "-broken"
	}
	d := w.f.deployment()
	d.Spec.Template.Spec.Containers[0].Image = img
	w.update(d, "image "+img)
}

func (w *stepsWorld) scale(replicas int32) {
	d := w.f.deployment()
	d.Spec.Replicas = ptr.To(replicas)
	w.scaled = true
	w.update(d, fmt.Sprintf("scale %d", replicas))
	w.setFencepostPods()
}

// annotate sets annotation key of the Deployment to value, as `kubedeploy rollout promote` or `abort` or a user
// does, and settles.
func (w *stepsWorld) annotate(key, value string) {
	d := w.f.deployment()
	d.Annotations[key] = value
	w.update(d, key+"="+strings.ReplaceAll(value, "\n", ";"))
}

// revision returns the Deployment's revision and its recorded step state.
func (w *stepsWorld) revision() (int64, rolloutstate.StepState) {
	d := w.f.deployment()
	rev, _ := strconv.ParseInt(d.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	st, _ := rolloutstate.StepStateOf(d)
	return rev, st
}

// undo is a hand-run `kubectl rollout undo` to the previous revision (ex2World.undo's rules).
func (w *stepsWorld) undo() {
	d := w.f.deployment()
	byRev, revs := byRevision(w.f)
	if len(revs) < 2 {
		return
	}
	rs := byRev[revs[len(revs)-2]]
	undoTo(d, &rs)
	w.update(d, "undo")
}

// randomSteps returns a valid step list from r: 1–4 steps, increasing weights, timed and untimed pauses.
func randomSteps(r *rand.Rand) string {
	var b strings.Builder
	weight := int32(0)
	for range 1 + r.IntN(4) {
		switch r.IntN(3) {
		case 0:
			weight += 1 + int32(r.IntN(60))
			if weight > 100 {
				return b.String() + "- pause: {}\n"
			}
			fmt.Fprintf(&b, "- setWeight: %d\n", weight)
		case 1:
			fmt.Fprintf(&b, "- pause: {duration: %ds}\n", 1+r.IntN(30))
		default:
			b.WriteString("- pause: {}\n")
		}
	}
	return b.String()
}

// apply performs one random action.
func (w *stepsWorld) apply(r *rand.Rand) {
	rev, st := w.revision()
	switch r.IntN(9) {
	case 0, 1:
		w.setImage(r.IntN(4) == 0)
	case 2:
		w.scale(1 + int32(r.IntN(12)))
	case 3:
		w.undo()
	case 4:
		w.annotate(rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(rev, st.Step, false))
	case 5:
		w.annotate(rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(rev, st.Step, true))
	case 6:
		w.abort()
	case 7:
		w.f.Clock.Step(time.Duration(r.IntN(20)) * time.Second)
		w.log = append(w.log, "time")
		w.settle()
	case 8:
		w.annotate(rolloutstate.RolloutStepsAnnotation, randomSteps(r))
	}
}

// abort is `kubedeploy rollout abort`: when the rollout is not complete, it must end rolled back from the
// aborted revision, complete, with the failed revision recorded and the Warning event.
func (w *stepsWorld) abort() {
	d := w.f.deployment()
	rev, _ := w.revision()
	if rolloutstate.Complete(d, &d.Status) {
		return
	}
	w.f.Events()
	w.annotate(rolloutstate.RolloutAbortAnnotation, strconv.FormatInt(rev, 10))
	after := w.f.deployment()
	events := strings.Join(w.f.Events(), "\n")
	if after.Annotations[rolloutstate.FailedRevisionAnnotation] != strconv.FormatInt(rev, 10) || !strings.Contains(events, "Warning "+RolloutAborted) {
		w.fatalf("abort of revision %d: failed revision %q; events:\n%s", rev, after.Annotations[rolloutstate.FailedRevisionAnnotation], events)
	}
	if !rolloutstate.Complete(after, &after.Status) && !broken(image(after.Spec.Template)) {
		w.fatalf("the rollback of an abort did not complete: %+v", after.Status)
	}
}

// finish ends the rollout: promoted past every step left, aborted if its image is broken; it must complete.
func (w *stepsWorld) finish() {
	d := w.f.deployment()
	if rolloutstate.Complete(d, &d.Status) {
		return
	}
	if broken(image(d.Spec.Template)) {
		w.abort()
	} else {
		rev, st := w.revision()
		w.annotate(rolloutstate.RolloutPromoteAnnotation, rolloutstate.PromoteValue(rev, st.Step, true))
	}
	if d := w.f.deployment(); !rolloutstate.Complete(d, &d.Status) && !broken(image(d.Spec.Template)) {
		w.fatalf("not complete at the end: %+v", d.Status)
	}
}

// EX-5's property (issue 46): over random step lists, scales, image changes (some broken), hand undos, promotes,
// aborts and time passing, the new ReplicaSet never grows past the current step's pods, maxSurge and
// maxUnavailable hold, the controller never writes the spec but for an abort's rollback, and every rollout ends
// complete or rolled back.
func TestRolloutStepsRandomSequences(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 5))
	for i := range 40 {
		replicas := 1 + int32(r.IntN(12))
		surge, unavailable := intstr.FromInt32(int32(r.IntN(3))), intstr.FromString(fmt.Sprintf("%d%%", 25*r.IntN(3)))
		if surge.IntVal == 0 && unavailable.StrVal == "0%" {
			surge = intstr.FromInt32(1)
		}
		steps := randomSteps(r)
		seed := r.Uint64()
		t.Run(fmt.Sprintf("%d/replicas=%d/surge=%s/unavailable=%s", i, replicas, surge.String(), unavailable.String()), func(t *testing.T) {
			w := newStepsWorld(t, replicas, surge, unavailable, steps)
			w.setFencepostPods()
			rr := rand.New(rand.NewPCG(seed, 0))
			for range 12 {
				w.apply(rr)
			}
			w.finish()
		})
	}
}
