package deployment

import (
	"errors"
	"slices"
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
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// ex2Deadline is the progress deadline of ex2World's Deployment.
const ex2Deadline = 60 * time.Second

// ex2World runs the Deployment controller's real syncs over the fixture's fake API server through a sequence of
// user actions (image changes, hand-run `kubectl rollout undo`, waiting past the progress deadline) on a
// Deployment opted into EX-2. It stands in for the ReplicaSet controller and the kubelets: after each sync every
// ReplicaSet's status shows its spec.replicas, all available when its image is healthy, none when the image ends
// in "broken" (its pods never become ready). It also stands in for the API server's generation: a change of the
// Deployment's template bumps it.
type ex2World struct {
	f *fixture
	// template is the Deployment's template when the generation was last set.
	template v1.PodTemplateSpec
	// lastComplete is the oracle: the image of the last revision that completed, "" for none. A healthy
	// template always completes once settled (no time passes meanwhile); a broken one never does.
	lastComplete string
	// images counts the images set, to name each new one.
	images int
}

// newEX2World returns the world with the Deployment "nginx" (4 replicas, maxSurge and maxUnavailable 25%, a
// revision history long enough that no ReplicaSet is deleted) created at nginx:v0, or nginx:v0-broken, and
// settled.
func newEX2World(t *testing.T, startBroken bool) *ex2World {
	surge, unavailable := pct25()
	d := newDeployment(4, surge, unavailable)
	d.Spec.Template = podTemplate("nginx:v0")
	if startBroken {
		d.Spec.Template = podTemplate("nginx:v0-broken")
	}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](100)
	d.Spec.ProgressDeadlineSeconds = ptr.To(int32(ex2Deadline / time.Second))
	d.Annotations = map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true"}
	w := &ex2World{f: newFixture(t, d), template: d.Spec.Template}
	w.f.Client.PrependReactor("create", "replicasets", func(action core.Action) (bool, runtime.Object, error) {
		rs := action.(core.CreateAction).GetObject().(*appsv1.ReplicaSet)
		rs.UID, rs.Generation = types.UID(rs.Name+"-uid"), 1 // as the API server would; the fake sets neither
		return false, nil, nil
	})
	w.settle()
	return w
}

// broken reports whether image's pods never become ready in ex2World.
func broken(image string) bool { return strings.HasSuffix(image, "broken") }

// image returns the image of a pod template.
func image(t v1.PodTemplateSpec) string { return t.Spec.Containers[0].Image }

// settle syncs the Deployment and runs the ReplicaSets until a round changes nothing, checking after each sync
// that no ReplicaSet of a broken image is ever recorded complete. When the Deployment's image is healthy, it then
// checks that the rollout completed, and remembers it as the last complete one.
func (w *ex2World) settle() {
	f := w.f
	f.T.Helper()
	for range 60 {
		f.observe()
		_, err := f.sync()
		if err != nil && !errors.Is(err, runner.ErrConflict) {
			f.T.Fatalf("sync: %v", err)
		}
		writes := len(f.Writes())
		w.checkRecords()
		changed := w.runReplicaSets()
		w.bumpGeneration()
		if err == nil && writes == 0 && !changed {
			w.noteComplete()
			return
		}
	}
	f.T.Fatalf("the Deployment did not settle in 60 rounds: %+v", f.deployment().Status)
}

// noteComplete checks a settled Deployment with a healthy image is complete and records it in the oracle.
func (w *ex2World) noteComplete() {
	d := w.f.deployment()
	if broken(image(d.Spec.Template)) {
		return
	}
	if !rolloutstate.Complete(d, &d.Status) {
		w.f.T.Fatalf("settled at healthy %s but not complete: %+v", image(d.Spec.Template), d.Status)
	}
	w.lastComplete = image(d.Spec.Template)
}

// checkRecords fails the test when a ReplicaSet of a broken image carries rolloutstate.CompletedAtRevisionAnnotation,
// or the Deployment's rolloutstate.CompleteRevisionAnnotation names a revision no ReplicaSet completed at.
func (w *ex2World) checkRecords() {
	f := w.f
	f.T.Helper()
	var marks []string
	for _, rs := range f.replicaSets() {
		mark, ok := rs.Annotations[rolloutstate.CompletedAtRevisionAnnotation]
		if ok && broken(image(rs.Spec.Template)) {
			f.T.Fatalf("ReplicaSet %s of %s recorded complete at revision %s", rs.Name, image(rs.Spec.Template), mark)
		}
		marks = append(marks, mark)
	}
	if rec, ok := f.deployment().Annotations[rolloutstate.CompleteRevisionAnnotation]; ok && !slices.Contains(marks, rec) {
		f.T.Fatalf("the Deployment shows complete revision %s, no ReplicaSet completed at it (records %q)", rec, marks)
	}
}

// runReplicaSets writes each ReplicaSet's status as its pods would make it (see ex2World) and reports whether any
// changed.
func (w *ex2World) runReplicaSets() bool { return runReplicaSetsAsPods(w.f) }

// runReplicaSetsAsPods writes each ReplicaSet's status as its pods would make it, standing in for the ReplicaSet
// controller and the kubelets: its spec.replicas, all available unless its image is broken (none then), for its
// current generation. It reports whether any status changed.
func runReplicaSetsAsPods(f *fixture) bool {
	changed := false
	for _, rs := range f.replicaSets() {
		n := ptr.Deref(rs.Spec.Replicas, 1)
		available := n
		if broken(image(rs.Spec.Template)) {
			available = 0
		}
		if rs.Status.Replicas == n && rs.Status.AvailableReplicas == available && rs.Status.ObservedGeneration == rs.Generation {
			continue
		}
		withStatus(&rs, n, available)
		rs.Status.ObservedGeneration = rs.Generation
		if _, err := f.Client.AppsV1().ReplicaSets("ns").UpdateStatus(f.Ctx, &rs, metav1.UpdateOptions{}); err != nil {
			f.T.Fatal(err)
		}
		changed = true
	}
	return changed
}

// bumpGeneration advances the Deployment's generation when its template changed since it was last set, as the
// API server does for a spec change (the fake one does not).
func (w *ex2World) bumpGeneration() { bumpGeneration(w.f, &w.template) }

// bumpGeneration advances the Deployment's generation when its template is no longer *template (a write of the
// controller's, such as a rollback), as the API server does for a spec change (the fake one does not), and
// makes *template the current one.
func bumpGeneration(f *fixture, template *v1.PodTemplateSpec) {
	d := f.deployment()
	if equality.Semantic.DeepEqual(d.Spec.Template, *template) {
		return
	}
	d.Generation++
	*template = d.Spec.Template
	if _, err := f.Client.AppsV1().Deployments("ns").Update(f.Ctx, d, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// setImage is `kubectl set image` to a new image, healthy or broken, then settle.
func (w *ex2World) setImage(isBroken bool) {
	w.images++
	img := "nginx:v" + strconv.Itoa(w.images)
	if isBroken {
		img += "-broken"
	}
	d := w.f.deployment()
	d.Spec.Template.Spec.Containers[0].Image = img
	w.update(d)
	w.settle()
}

// update writes d as a user would (the API server bumps the generation of a spec change).
func (w *ex2World) update(d *appsv1.Deployment) {
	d.Generation++
	w.template = d.Spec.Template
	if _, err := w.f.Client.AppsV1().Deployments("ns").Update(w.f.Ctx, d, metav1.UpdateOptions{}); err != nil {
		w.f.T.Fatal(err)
	}
}
