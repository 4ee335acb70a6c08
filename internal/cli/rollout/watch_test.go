package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/cli/rollout/viewmodel"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// rolloutObjects is a 4-replica Deployment mid-rollout: the new ReplicaSet
// (revision 2, nginx:broken, created 10 s ago) has 2 pods waiting in
// ImagePullBackOff, the old one (revision 1, an hour old) 3 available pods.
// Its events: one of this rollout, one of the rollout an hour ago, one of an
// earlier Deployment of the same name.
func rolloutObjects(progressing appsv1.DeploymentCondition) []runtime.Object {
	labels := map[string]string{"app": "web"}
	tmpl := func(image string) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}},
		}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid", Generation: 2},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tmpl("nginx:broken"),
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 5, UpdatedReplicas: 2, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{progressing},
		},
	}
	owner := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	rs := func(name, rev, image string, spec, avail int32, age time.Duration) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: "ns", UID: types.UID(name), Labels: labels, CreationTimestamp: metav1.NewTime(time.Now().Add(-age)),
				Annotations:     map[string]string{rolloutstate.RevisionAnnotation: rev},
				OwnerReferences: owner("Deployment", "web", d.UID),
			},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(spec), Selector: d.Spec.Selector, Template: tmpl(image)},
			Status: appsv1.ReplicaSetStatus{Replicas: spec, ReadyReplicas: avail, AvailableReplicas: avail},
		}
	}
	objs := []runtime.Object{d, rs("web-new", "2", "nginx:broken", 2, 0, 10*time.Second), rs("web-old", "1", "nginx:1", 3, 3, time.Hour)}
	for _, name := range []string{"web-new-a", "web-new-b"} {
		objs = append(objs, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, OwnerReferences: owner("ReplicaSet", "web-new", "web-new")},
			Spec:       v1.PodSpec{NodeName: "node-0"},
			Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{
				Name: "web", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nginx:broken"`}},
			}}},
		})
	}
	return append(objs,
		rolloutEvent("web.1", "", "Scaled up replica set web-new from 0 to 2", 0),
		// The earlier rollout's event is not this one's (issue 33).
		rolloutEvent("web.00", "", "Scaled up replica set web-old from 0 to 4", time.Hour),
		// An event of an earlier Deployment of the same name is not this one's.
		rolloutEvent("web.0", "earlier-d-uid", "Scaled up replica set web-earlier from 0 to 9", 0))
}

// completeObjects makes rolloutObjects' objects a complete rollout: the Deployment's status 4 of 4 updated and
// available, and its ReplicaSets' the same (the new one at 4, all available, the old one at 0), as the status
// counts them (ST-2). It returns objs.
func completeObjects(objs []runtime.Object) []runtime.Object {
	d := objs[0].(*appsv1.Deployment)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 4, AvailableReplicas: 4}
	newRS, oldRS := objs[1].(*appsv1.ReplicaSet), objs[2].(*appsv1.ReplicaSet)
	newRS.Spec.Replicas, newRS.Status = ptr.To[int32](4), appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
	oldRS.Spec.Replicas, oldRS.Status = ptr.To[int32](0), appsv1.ReplicaSetStatus{}
	return objs
}

// rolloutEvent is a ScalingReplicaSet event of Deployment ns/web (of any
// with that name when uid is "") that happened age ago.
func rolloutEvent(name string, uid types.UID, msg string, age time.Duration) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("e-" + name)},
		InvolvedObject: v1.ObjectReference{Kind: "Deployment", Name: "web", Namespace: "ns", UID: uid},
		Type:           v1.EventTypeNormal, Reason: "ScalingReplicaSet", Message: msg,
		LastTimestamp: metav1.NewTime(time.Now().Add(-age)), Count: 1,
	}
}

var (
	progressingCondition = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: "ReplicaSetUpdated"}
	deadlineCondition    = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionFalse, Reason: rolloutstate.ProgressDeadlineExceeded}
)

// Issue 11: piped, watch prints plain lines that name every stuck pod with
// its reason and the container's message, returns the deadline error, and
// with --timeline writes the picture of what it recorded.
func TestWatchPlainDeadlineAndTimeline(t *testing.T) {
	client := fake.NewClientset(rolloutObjects(deadlineCondition)...)
	var out, errOut bytes.Buffer
	svg := filepath.Join(t.TempDir(), "rollout.svg")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := watchRollout(ctx, client, "ns", "web", &watchOptions{events: 3, timeline: svg}, &out, &errOut)
	if !errors.Is(err, viewmodel.ErrDeadline) {
		t.Fatalf("error %v, want the deadline\n%s", err, out.String())
	}
	for _, want := range []string{
		"deployment/web: 2/4 updated, 3 available, 5 total; Progressing=False ProgressDeadlineExceeded",
		"new web-new: 2 desired, 0 ready, 0 available",
		"old web-old: 3 desired, 3 ready, 3 available",
		`why: 2 ImagePullBackOff: web-new-a, web-new-b (container web: Back-off pulling image "nginx:broken")`,
		"event: Normal ScalingReplicaSet: Scaled up replica set web-new from 0 to 2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "web-earlier") {
		t.Errorf("output shows an earlier Deployment's event:\n%s", out.String())
	}
	if strings.Contains(out.String(), "web-old from 0 to 4") {
		t.Errorf("output shows an earlier rollout's event (issue 33):\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "wrote the rollout's timeline (1 changes, 1 events) to "+svg) {
		t.Errorf("stderr: %s", errOut.String())
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("timeline %s: %v", svg, err)
	}
}

// A complete rollout ends the watch with nil and kubectl's sentence; a
// progressing one runs until the context ends, which is a timeout error.
func TestWatchCompleteAndTimeout(t *testing.T) {
	objs := completeObjects(rolloutObjects(progressingCondition))
	var out bytes.Buffer
	if err := watchRollout(context.Background(), fake.NewClientset(objs...), "ns", "web", &watchOptions{}, &out, &out); err != nil {
		t.Fatalf("complete: %v\n%s", err, out.String())
	}
	if !strings.HasSuffix(out.String(), "deployment \"web\" successfully rolled out\n") || strings.Contains(out.String(), "why:") {
		t.Errorf("complete output:\n%s", out.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out.Reset()
	err := watchRollout(ctx, fake.NewClientset(rolloutObjects(progressingCondition)...), "ns", "web", &watchOptions{}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "timed out waiting for the rollout") {
		t.Errorf("progressing: error %v", err)
	}
	// One block only: the view did not change while waiting.
	if n := strings.Count(out.String(), "deployment/web:"); n != 1 {
		t.Errorf("%d blocks, want 1:\n%s", n, out.String())
	}

	// Issue 44: the error names the namespace it looked in, as `rollout plan`'s does.
	err = watchRollout(context.Background(), fake.NewClientset(), "nons", "web", &watchOptions{}, &out, &out)
	if err == nil || err.Error() != "deployment nons/web not found" {
		t.Errorf("missing Deployment: error %v, want %q", err, "deployment nons/web not found")
	}
}

// cancelOnWrite is an io.Writer that cancels a context at its first write: Ctrl-C once the first block is out.
// (It holds its buffer rather than embedding it, whose WriteString would bypass Write.)
type cancelOnWrite struct {
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.buf.Write(p)
}

// Issue 44: Ctrl-C (main cancels the command's context) during a plain watch says the watch was stopped, in the
// terminal view's words, not that it timed out; with --timeout, Ctrl-C before the deadline still says stopped.
func TestWatchPlainInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"no timeout", 0}, {"before --timeout", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			out := &cancelOnWrite{cancel: cancel}
			err := watchRollout(ctx, fake.NewClientset(rolloutObjects(progressingCondition)...), "ns", "web", &watchOptions{}, out, io.Discard)
			if !errors.Is(err, errStopped) || err.Error() != "stopped watching before the rollout ended" {
				t.Errorf("error %v, want errStopped\n%s", err, out.buf.String())
			}
		})
	}
}

// Issue 44: negative durations and counts are refused with the flag's name, before anything is read.
func TestWatchAndPlanRefuseNegativeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "deploy/web", "--timeout", "-5s"}, "--timeout must be at least 0s, got -5s"},
		{[]string{"watch", "deploy/web", "--events", "-1"}, "--events must be at least 0, got -1"},
		{[]string{"watch", "deploy/web", "--request-timeout", "-5s"}, "--request-timeout must be at least 0s, got -5s"},
		{[]string{"plan", "deploy/web", "--request-timeout", "-1m"}, "--request-timeout must be at least 0s, got -1m0s"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := NewCommand(Options{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append(tc.args, "--kubeconfig", "/nonexistent"))
			if err := cmd.ExecuteContext(context.Background()); err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A rollout held by its partition (EX-1) is a state it stays in: watch ends
// there, exit 0, with the verdict (rolloutstate.HeldSummary).
func TestWatchEndsHeldAtPartition(t *testing.T) {
	objs := rolloutObjects(progressingCondition)
	d := objs[0].(*appsv1.Deployment)
	msg := `ReplicaSet "web-new" has 1 of 4 pods updated, held by kubedeploy.io/rollout-partition.`
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Annotations = map[string]string{rolloutstate.RolloutPartitionAnnotation: "1"}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 4,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutPartitioned, Message: msg}}}
	newRS := objs[1].(*appsv1.ReplicaSet)
	newRS.Spec.Replicas = ptr.To[int32](1)
	newRS.Status = appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := watchRollout(ctx, fake.NewClientset(objs...), "ns", "web", &watchOptions{}, &out, &out); err != nil {
		t.Fatalf("held: %v\n%s", err, out.String())
	}
	if want := `deployment "web" rollout held by kubedeploy.io/rollout-partition: 1 of 4 pods updated` + "\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("held output, want it to end with %q:\n%s", want, out.String())
	}
}

// EX-2: at the deadline of an opted-in Deployment whose last complete
// revision's ReplicaSet is there, watch keeps following (the controller is
// about to roll back) instead of failing; once the rollback completed it
// ends with an error naming the failed revision.
func TestWatchFollowsAutoRollback(t *testing.T) {
	objs := rolloutObjects(deadlineCondition)
	d := objs[0].(*appsv1.Deployment)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true", rolloutstate.CompleteRevisionAnnotation: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	err := watchRollout(ctx, fake.NewClientset(objs...), "ns", "web", &watchOptions{}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "timed out waiting") {
		t.Errorf("rollback pending: error %v, want the watch still following at its timeout\n%s", err, out.String())
	}

	objs = completeObjects(rolloutObjects(progressingCondition))
	d = objs[0].(*appsv1.Deployment)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3", rolloutstate.FailedRevisionAnnotation: "2"}
	out.Reset()
	err = watchRollout(context.Background(), fake.NewClientset(objs...), "ns", "web", &watchOptions{}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "revision 2 exceeded its progress deadline and was rolled back automatically") {
		t.Errorf("rolled back: error %v\n%s", err, out.String())
	}
}

// A bad --timeline is refused before anything is watched.
func TestWatchRejectsBadTimelinePath(t *testing.T) {
	for path, want := range map[string]string{
		"x.jpg": ".png or .svg",
		filepath.Join(t.TempDir(), "no", "x.png"): "no such file or directory",
	} {
		cmd := NewCommand(Options{})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{"watch", "deploy/web", "--timeline", path, "--kubeconfig", "/nonexistent"})
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--timeline %s: error %v, want %q", path, err, want)
		}
	}
}

// inputOf returns the view model input of rolloutObjects' objects.
func inputOf(objs []runtime.Object, maxEvents int) viewmodel.Input {
	in := viewmodel.Input{Deployment: objs[0].(*appsv1.Deployment), MaxEvents: maxEvents}
	for _, o := range objs[1:] {
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			in.ReplicaSets = append(in.ReplicaSets, o)
		case *v1.Pod:
			in.Pods = append(in.Pods, o)
		case *v1.Event:
			in.Events = append(in.Events, o)
		}
	}
	return in
}

// The terminal view, run as a bubbletea program (teatest), draws one bar
// per ReplicaSet with its counts, the conditions, the why-stuck groups with
// the message, and the events; it stops on q, and quits by itself with the
// final model once a model arrives whose rollout ended.
func TestTerminalView(t *testing.T) {
	progressing := viewmodel.Build(inputOf(rolloutObjects(progressingCondition), 3), time.Now())
	tm := teatest.NewTestModel(t, newTUIModel(progressing, nil), teatest.WithInitialTermSize(120, 40))
	wants := []string{
		"deployment/web: 2/4 updated, 3 available, 5 total",
		"Progressing=True", "ReplicaSetUpdated",
		"new web-new rev 2", "old web-old rev 1", "2 desired  0 ready  0 available", "3 desired  3 ready  3 available",
		"2 ImagePullBackOff: web-new-a, web-new-b", `container web: Back-off pulling image "nginx:broken"`,
		"Normal ScalingReplicaSet: Scaled up replica set web-new from 0 to 2",
		"q: stop watching",
	}
	var screen string
	waitScreen(t, tm, &screen, wants...)
	tm.Type("q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(tuiModel)
	if !final.stopped {
		t.Errorf("q does not stop the view")
	}
	if err := terminalOutcome(context.Background(), final, nil, &bytes.Buffer{}); !errors.Is(err, errStopped) {
		t.Errorf("stopped view: outcome %v, want errStopped", err)
	}
	if strings.Contains(final.View(), "q: stop watching") {
		t.Errorf("stopped view still offers q:\n%s", final.View())
	}

	// A model of a failed rollout ends the program; the outcome is the deadline.
	tm = teatest.NewTestModel(t, newTUIModel(progressing, nil), teatest.WithInitialTermSize(120, 40))
	tm.Send(modelMsg{m: viewmodel.Build(inputOf(rolloutObjects(deadlineCondition), 3), time.Now())})
	final = tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(tuiModel)
	var out bytes.Buffer
	if err := terminalOutcome(context.Background(), final, nil, &out); !errors.Is(err, viewmodel.ErrDeadline) {
		t.Errorf("failed rollout: outcome %v, want the deadline", err)
	}
	if v := final.View(); !strings.Contains(v, "Progressing=False") || strings.Contains(v, "q: stop watching") {
		t.Errorf("failed rollout's last screen:\n%s", v)
	}

	// An error reading the caches ends the program with that error.
	tm = teatest.NewTestModel(t, newTUIModel(progressing, nil))
	tm.Send(modelMsg{err: errors.New("deployment ns/web was deleted and created again while watching")})
	final = tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(tuiModel)
	if err := terminalOutcome(context.Background(), final, nil, &out); err == nil || !strings.Contains(err.Error(), "created again") {
		t.Errorf("read error: outcome %v", err)
	}
}

// Each ReplicaSet's bar is as full as its available pods are of the
// Deployment's replicas (rounded to whole cells).
func TestTerminalViewBars(t *testing.T) {
	screen := newTUIModel(viewmodel.Build(inputOf(rolloutObjects(progressingCondition), 0), time.Now()), nil).View()
	full := int(math.Round(barWidth * 3 / 4.0))
	var seen int
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "web-old rev") {
			seen++
			if n := strings.Count(l, "█"); n != full {
				t.Errorf("old bar %q: %d full cells, want %d", l, n, full)
			}
		}
		if strings.Contains(l, "web-new rev") {
			seen++
			if strings.Contains(l, "█") {
				t.Errorf("new bar %q: want empty", l)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d bars, want 2:\n%s", seen, screen)
	}
}

// plainModel returns the view of rolloutObjects' rollout at now, with one
// more pod of the new ReplicaSet, not Ready since start (its why-message
// ages), and the ImagePullBackOff pods' message msg.
func plainModel(now, start time.Time, msg string) *viewmodel.Model {
	objs := rolloutObjects(progressingCondition)
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			p.Status.ContainerStatuses[0].State.Waiting.Message = msg
		}
	}
	notReady := objs[3].(*v1.Pod).DeepCopy()
	notReady.Name = "web-new-c"
	notReady.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: ptr.To(metav1.NewTime(start))}
	return viewmodel.Build(inputOf(append(objs, notReady), 3), now)
}

// Piped (issue 33): a block only when what it shows changed, ages in
// why-messages aside; at most one a second, a change that comes sooner
// printed with the next look (or at the end); the last one at once.
func TestPlainViewPrintsChanges(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pull := `Back-off pulling image "nginx:broken"`
	var out bytes.Buffer
	p := &plainView{out: &out}
	blocks := func() int { return strings.Count(out.String(), "deployment/web:") }
	look := func(at time.Duration, msg string) {
		t.Helper()
		if done, err := p.show(plainModel(t0.Add(at), t0, msg), t0.Add(at)); done || err != nil {
			t.Fatalf("show at %v: done %v, err %v", at, done, err)
		}
	}

	look(0, pull)
	look(time.Second, pull) // only "not Ready after 1s" ticked
	look(5*time.Second, pull)
	if blocks() != 1 || !strings.HasPrefix(out.String(), "12:00:00 deployment/web:") || !strings.Contains(out.String(), "not Ready after 0s") {
		t.Fatalf("ages alone printed blocks, or the first is not stamped 12:00:00:\n%s", out.String())
	}

	// A why-message changes: a block.
	look(6*time.Second, "manifest unknown")
	if blocks() != 2 || !strings.Contains(out.String(), "12:00:06 deployment/web:") || !strings.Contains(out.String(), "(container web: manifest unknown)") {
		t.Fatalf("a changed why-message printed no block:\n%s", out.String())
	}
	// It changes back 300 ms later: held until a second after the last block.
	look(6300*time.Millisecond, pull)
	if blocks() != 2 {
		t.Fatalf("two blocks within a second:\n%s", out.String())
	}
	look(7*time.Second, pull)
	if blocks() != 3 || !strings.Contains(out.String(), "12:00:07 deployment/web:") {
		t.Fatalf("the held change was not printed a second later:\n%s", out.String())
	}

	// A change held when the watch ends is printed by flush, with its time.
	look(7500*time.Millisecond, "manifest unknown")
	p.flush()
	if last := out.String()[strings.LastIndex(out.String(), "12:00:07 deployment/web:"):]; blocks() != 4 || !strings.Contains(last, "(container web: manifest unknown)") {
		t.Fatalf("flush did not print the held change:\n%s", out.String())
	}
	p.flush()
	if blocks() != 4 {
		t.Errorf("a second flush printed again:\n%s", out.String())
	}

	// The rollout ends 100 ms after a block: its state and the last line at once.
	objs := completeObjects(rolloutObjects(progressingCondition))
	if done, err := p.show(viewmodel.Build(inputOf(objs, 3), t0.Add(7600*time.Millisecond)), t0.Add(7600*time.Millisecond)); !done || err != nil {
		t.Fatalf("complete: done %v, err %v", done, err)
	}
	if !strings.HasSuffix(out.String(), "deployment \"web\" successfully rolled out\n") || blocks() != 5 {
		t.Errorf("the end was not printed at once:\n%s", out.String())
	}
}

// Piped (issue 44): each event line is printed in one block only, though every model holds the latest three and
// consecutive blocks would repeat them; also one counted up again, and one in a held block that flush prints. An
// event whose message changes (the aggregator's "combined from similar events") is a new line.
func TestPlainViewPrintsEachEventOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	event := func(i int, count int32) *v1.Event {
		e := rolloutEvent(fmt.Sprintf("web.%d", i), "", fmt.Sprintf("event %d", i), time.Duration(9-i)*time.Second)
		e.Count = count
		return e
	}
	var out bytes.Buffer
	p := &plainView{out: &out}
	look := func(at time.Duration, events ...*v1.Event) {
		t.Helper()
		in := inputOf(rolloutObjects(progressingCondition), 3)
		in.Events = events // the watcher's cache: every event so far; the model keeps the latest 3
		if done, err := p.show(viewmodel.Build(in, t0.Add(at)), t0.Add(at)); done || err != nil {
			t.Fatalf("show at %v: done %v, err %v", at, done, err)
		}
	}
	look(0, event(1, 1), event(2, 1))
	look(2*time.Second, event(1, 1), event(2, 1), event(3, 1))
	look(4*time.Second, event(1, 1), event(2, 1), event(3, 1), event(4, 1), event(5, 1))
	look(4300*time.Millisecond, event(1, 1), event(2, 1), event(3, 1), event(4, 1), event(5, 1), event(6, 1)) // held
	look(4600*time.Millisecond, event(1, 1), event(2, 1), event(3, 1), event(4, 1), event(5, 2), event(6, 1)) // held
	p.flush()
	combined := event(6, 2)
	combined.Message = "(combined from similar events): event 7"
	look(6*time.Second, event(1, 1), event(2, 1), event(3, 1), event(4, 1), event(5, 2), combined)

	if blocks := strings.Count(out.String(), "deployment/web:"); blocks != 5 {
		t.Errorf("%d blocks, want 5:\n%s", blocks, out.String())
	}
	for i, msg := range []string{"event 1", "event 2", "event 3", "event 4", "event 5", "event 6", "(combined from similar events): event 7"} {
		line := "event: Normal ScalingReplicaSet: " + msg + "\n"
		if got := strings.Count(out.String(), line); got != 1 {
			t.Errorf("%d: %q printed %d times, want once:\n%s", i, strings.TrimSpace(line), got, out.String())
		}
	}
}

// EX-5 in the terminal view: a rollout held at a pause step keeps the view open and offers p, f and a; p
// writes the promote of that step (as `rollout promote` does) and the view says so.
func TestTerminalViewPromotesAStep(t *testing.T) {
	held := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutStepPaused}
	objs := rolloutObjects(held)
	d := objs[0].(*appsv1.Deployment)
	d.Annotations = map[string]string{
		rolloutstate.RevisionAnnotation:     "2",
		rolloutstate.RolloutStepsAnnotation: "- setWeight: 50\n- pause: {}\n",
		rolloutstate.RolloutStepAnnotation:  rolloutstate.StepState{Revision: 2, Step: 1}.Encode(),
	}
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	client := fake.NewClientset(objs...)
	m := viewmodel.Build(inputOf(objs, 3), time.Now())
	tm := teatest.NewTestModel(t, newTUIModel(m, &stepKeys{ctx: context.Background(), client: client, ns: "ns", name: "web"}), teatest.WithInitialTermSize(120, 40))
	tm.Send(modelMsg{m: m})
	var screen string
	waitScreen(t, tm, &screen, "p: promote  f: promote --full  a: abort  q: stop watching")
	tm.Type("p")
	waitScreen(t, tm, &screen, "promoted: step 2 of 2 (pause until promoted) of revision 2 ends")
	got, err := client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || got.Annotations[rolloutstate.RolloutPromoteAnnotation] != "2/1" {
		t.Errorf("after p: %v, annotations %v", err, got.Annotations)
	}
	tm.Type("q")
	if final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(tuiModel); !final.stopped {
		t.Errorf("q does not stop the view")
	}
}

// waitScreen waits, up to 10 s, until the terminal output of tm, appended to *screen, holds every one of wants.
func waitScreen(t *testing.T, tm *teatest.TestModel, screen *string, wants ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		*screen += string(b)
		for _, want := range wants {
			if !strings.Contains(*screen, want) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second))
}
