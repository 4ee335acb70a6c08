package viewmodel

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the models")

// now is the time every case is judged at.
var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

var labels = map[string]string{"app": "web"}

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// deployment is a 4-replica Deployment "web" of image at generation 2,
// observed.
func deployment(image string, status appsv1.DeploymentStatus, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	status.ObservedGeneration = 2
	status.Conditions = conds
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid", Generation: 2,
			Annotations: map[string]string{rolloutstate.RevisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: template(image),
		},
		Status: status,
	}
}

func template(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}},
	}
}

// replicaSet is a ReplicaSet of d at revision rev with image, size desired
// and avail ready and available pods.
func replicaSet(d *appsv1.Deployment, name, rev, image string, desired, avail int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name), Labels: labels,
			Annotations:     map[string]string{rolloutstate.RevisionAnnotation: rev},
			OwnerReferences: controllerRef("Deployment", d.Name, d.UID),
		},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(desired), Selector: d.Spec.Selector, Template: template(image)},
		Status: appsv1.ReplicaSetStatus{Replicas: desired, ReadyReplicas: avail, AvailableReplicas: avail},
	}
}

// pod is a pod of rs on node-0, waiting with reason (or Ready when reason
// is "").
func pod(rs *appsv1.ReplicaSet, name, reason, message string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, OwnerReferences: controllerRef("ReplicaSet", rs.Name, rs.UID),
			CreationTimestamp: metav1.NewTime(now.Add(-30 * time.Second))},
		Spec: v1.PodSpec{NodeName: "node-0"},
	}
	switch reason {
	case "":
		p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	case unavailable.NotReady:
		p.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: ptr.To(metav1.NewTime(now.Add(-12 * time.Second)))}
	default:
		p.Status = v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}},
		}}}
	}
	return p
}

func event(name, typ, reason, msg string, at time.Time, uid types.UID) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("e-" + name)},
		InvolvedObject: v1.ObjectReference{Kind: "Deployment", Name: "web", Namespace: "ns", UID: uid},
		Type:           typ, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at), Count: 1,
	}
}

var (
	progressing = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: "ReplicaSetUpdated"}
	complete    = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.NewReplicaSetAvailable}
	deadline    = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionFalse, Reason: rolloutstate.ProgressDeadlineExceeded}
	available   = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: v1.ConditionTrue, Reason: "MinimumReplicasAvailable"}
)

// cases are the rollouts the golden files show, by file name.
func cases() map[string]Input {
	return map[string]Input{
		"image-pull":     imagePullCase(),
		"deadline":       deadlineCase(),
		"complete":       completeCase(),
		"held":           heldCase(),
		"held-kept-back": heldKeptBackCase(),
		"invalid":        invalidCase(),
		"rolled-back":    rolledBackCase(),
		"not-observed":   notObservedCase(),
		"spread":         spreadCase(),
		"spread-invalid": spreadInvalidCase(),
	}
}

// imagePullCase is mid-rollout: the new ReplicaSet's pods cannot pull their
// image; the events hold one of an earlier Deployment of the same name.
func imagePullCase() Input {
	d := deployment("nginx:broken", appsv1.DeploymentStatus{Replicas: 5, UpdatedReplicas: 2, AvailableReplicas: 3}, available, progressing)
	newRS, oldRS := replicaSet(d, "web-new", "2", "nginx:broken", 2, 0), replicaSet(d, "web-old", "1", "nginx:1", 3, 3)
	return Input{
		Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{oldRS, newRS},
		Pods: []*v1.Pod{
			pod(newRS, "web-new-b", "ImagePullBackOff", `Back-off pulling image "nginx:broken"`),
			pod(newRS, "web-new-a", "ImagePullBackOff", `Back-off pulling image "nginx:broken"`),
			pod(oldRS, "web-old-a", "", ""),
		},
		Events: []*v1.Event{
			event("web.2", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled down replica set web-old from 4 to 3", now.Add(-5*time.Second), ""),
			event("web.1", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set web-new from 0 to 2", now.Add(-5*time.Second), "d-uid"),
			event("web.0", v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set web-earlier from 0 to 9", now.Add(-time.Hour), "earlier-uid"),
		},
		MaxEvents: 3,
	}
}

// deadlineCase is past the deadline, with more stuck pods than the why-line
// names and one not Ready; a ReplicaSet of another owner is left out.
func deadlineCase() Input {
	d := deployment("nginx:broken", appsv1.DeploymentStatus{Replicas: 16, UpdatedReplicas: 12, AvailableReplicas: 4}, deadline)
	d.Spec.Replicas = ptr.To[int32](12)
	newRS, oldRS := replicaSet(d, "web-new", "2", "nginx:broken", 12, 0), replicaSet(d, "web-old", "1", "nginx:1", 4, 4)
	stranger := replicaSet(d, "other", "1", "nginx:1", 3, 3)
	stranger.OwnerReferences = controllerRef("Deployment", "other", "other-uid")
	in := Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, oldRS, stranger}}
	for i := range 11 {
		in.Pods = append(in.Pods, pod(newRS, fmt.Sprintf("web-new-%02d", i), "ErrImagePull", "not found"))
	}
	in.Pods = append(in.Pods, pod(newRS, "web-new-zz", unavailable.NotReady, ""))
	return in
}

// completeCase is complete: no why-lines even though a pod is not Ready (the
// view trusts the status), the old ReplicaSet at 0 is not drawn.
func completeCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, AvailableReplicas: 4}, available, complete)
	newRS := replicaSet(d, "web-new", "2", "nginx:2", 4, 4)
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, replicaSet(d, "web-old", "1", "nginx:1", 0, 0)},
		Pods: []*v1.Pod{pod(newRS, "web-new-a", unavailable.NotReady, "")}}
}

// heldCase is held at its partition (EX-1), paused.
func heldCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 4},
		appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutPartitioned,
			Message: `ReplicaSet "web-new" has 1 of 4 pods updated, held by kubedeploy.io/rollout-partition.`})
	d.Spec.Paused = true
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Annotations[rolloutstate.RolloutPartitionAnnotation] = "1"
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet(d, "web-new", "2", "nginx:2", 1, 1), replicaSet(d, "web-old", "1", "nginx:1", 3, 3)}}
}

// heldKeptBackCase is held at its partition with the pods kept on the old
// template unavailable (EX-1): still held.
func heldKeptBackCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3},
		appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: rolloutstate.RolloutPartitioned,
			Message: `ReplicaSet "web-new" has 3 of 4 pods updated, held by kubedeploy.io/rollout-partition; 1 pod kept on the old template is unavailable.`})
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Annotations[rolloutstate.RolloutPartitionAnnotation] = "3"
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet(d, "web-new", "2", "nginx:2", 3, 3), replicaSet(d, "web-old", "1", "nginx:broken", 1, 0)}}
}

// invalidCase is stuck on an invalid partition value (EX-1): the watch ends
// with ErrInvalidPolicy.
func invalidCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 0, AvailableReplicas: 4},
		appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: v1.ConditionFalse, Reason: rolloutstate.InvalidRolloutPartition})
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Annotations[rolloutstate.RolloutPartitionAnnotation] = "banana"
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet(d, "web-new", "2", "nginx:2", 0, 0), replicaSet(d, "web-old", "1", "nginx:1", 4, 4)}}
}

// rolledBackCase is rolled back automatically (EX-2): revision 2 failed, 3 is
// complete.
func rolledBackCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, AvailableReplicas: 4}, available, complete)
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "3", rolloutstate.FailedRevisionAnnotation: "2"}
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet(d, "web-old", "3", "nginx:2", 4, 4)}}
}

// notObservedCase is not observed yet: no ReplicaSet matches the template; an
// old one is terminating its last pod (size 0, status 1).
func notObservedCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 1, AvailableReplicas: 0})
	d.Generation = 3
	oldRS := replicaSet(d, "web-old", "1", "nginx:1", 0, 0)
	oldRS.Status.Replicas = 1
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{oldRS}, MaxEvents: 3}
}

// spreadCase is mid-rollout with kubedeploy.io/scale-down-spread (EX-4): the
// pods per zone of three nodes, one pod on a node without the zone label, one
// terminating and one unscheduled (neither counted).
func spreadCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 5, UpdatedReplicas: 2, AvailableReplicas: 4}, available, progressing)
	d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] = "topology.kubernetes.io/zone"
	newRS, oldRS := replicaSet(d, "web-new", "2", "nginx:2", 2, 1), replicaSet(d, "web-old", "1", "nginx:1", 3, 3)
	in := Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS, oldRS}}
	for i, node := range []string{"node-a", "node-b", "node-c", "node-bare"} {
		in.Nodes = append(in.Nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{}}})
		if node != "node-bare" {
			in.Nodes[i].Labels["topology.kubernetes.io/zone"] = "zone-" + node[5:]
		}
	}
	for _, p := range []struct {
		rs         *appsv1.ReplicaSet
		name, node string
	}{
		{newRS, "web-new-a", "node-a"}, {newRS, "web-new-b", "node-b"}, {oldRS, "web-old-a", "node-a"},
		{oldRS, "web-old-c", "node-c"}, {oldRS, "web-old-x", "node-bare"}, {oldRS, "web-old-gone", "node-c"}, {newRS, "web-new-pending", ""},
	} {
		pp := pod(p.rs, p.name, "", "")
		pp.Spec.NodeName = p.node
		if p.name == "web-old-gone" {
			pp.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		in.Pods = append(in.Pods, pp)
	}
	return in
}

// spreadInvalidCase: the annotation names no label key: the view says so.
func spreadInvalidCase() Input {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, AvailableReplicas: 4}, available, complete)
	d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] = "template"
	return Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{replicaSet(d, "web-new", "2", "nginx:2", 4, 4)}, Nodes: []*v1.Node{}}
}

// render is what the golden file of a case holds.
func render(m *Model) string {
	done, err := m.Outcome()
	var b strings.Builder
	fmt.Fprintf(&b, "phase: %s\ndone: %v\nerror: %v\n", m.Phase, done, err)
	if done && err == nil {
		fmt.Fprintf(&b, "ended: %s\n", m.Ended())
	}
	for _, rs := range m.ReplicaSets {
		fmt.Fprintf(&b, "bar %s: %.2f\n", rs.Name, rs.Fraction)
	}
	for _, g := range m.Stuck {
		fmt.Fprintf(&b, "passing %s: %v\n", g.Reason, Passing(g))
	}
	for _, c := range m.Deployment.Status.Conditions {
		fmt.Fprintf(&b, "healthy %s: %v\n", c.Type, Healthy(c))
	}
	fmt.Fprintf(&b, "--- lines\n%s\n--- lines without messages\n%s\n", m.Lines(true), m.Lines(false))
	return b.String()
}

// The view of each case, compared with testdata/NAME.golden (go test
// ./internal/cli/rollout/viewmodel -update rewrites them).
func TestGolden(t *testing.T) {
	for name, in := range cases() {
		t.Run(name, func(t *testing.T) {
			got := render(Build(in, now))
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs; got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// Every golden file has a case: a removed case leaves no stale file behind.
func TestGoldenFilesHaveCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	c := cases()
	for _, f := range files {
		if _, ok := c[strings.TrimSuffix(filepath.Base(f), ".golden")]; !ok {
			t.Errorf("%s has no case", f)
		}
	}
	if len(files) != len(c) {
		t.Errorf("%d golden files for %d cases", len(files), len(c))
	}
}

// Events of one second keep the order client-go's names give them (a longer
// hex suffix is later); the latest n are kept.
func TestLatestEvents(t *testing.T) {
	d := deployment("nginx:2", appsv1.DeploymentStatus{})
	at := now.Add(-time.Second)
	evs := []*v1.Event{
		event("web.10", "Normal", "B", "", at, ""),
		event("web.9", "Normal", "A", "", at, ""),
		event("web.100", "Normal", "C", "", at, ""),
		event("web.1", "Normal", "Z", "", at.Add(-time.Second), ""),
	}
	var got []string
	for _, e := range latestEvents(d, evs, 3, time.Time{}) {
		got = append(got, e.Reason)
	}
	if strings.Join(got, "") != "ABC" {
		t.Errorf("latest 3 events %v, want A B C", got)
	}
	if latestEvents(d, evs, 0, time.Time{}) != nil {
		t.Errorf("0 events asked, some returned")
	}
}

// EX-5, EX-6: a watch of a rollout that was aborted and rolled back ends with exit code 1 (ErrDeadline) and a
// message naming the cause, not a progress deadline it never reached.
func TestOutcomeNamesTheAbort(t *testing.T) {
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"progress deadline (EX-2)", "", "", "deployment ns/web: revision 2 exceeded its progress deadline and was rolled back automatically (kubedeploy.io/rollback-on-progress-deadline)"},
		{"rollout abort (EX-5)", rolloutstate.RolloutAbortAnnotation, "2", "deployment ns/web: rolled back from revision 2, aborted by `kubedeploy rollout abort`"},
		{"failed analysis (EX-6)", rolloutstate.RolloutAnalysisStateAnnotation,
			`{"revision":2,"runs":[{"step":1,"since":"2026-11-28T09:00:00Z","phase":"Failed","metrics":[{"name":"error-rate","failed":1}]}]}`,
			`deployment ns/web: rolled back from revision 2, whose analysis failed on metric "error-rate"`},
	} {
		in := rolledBackCase()
		if tc.key != "" {
			in.Deployment.Annotations[tc.key] = tc.value
		}
		done, err := Build(in, now).Outcome()
		if !done || !errors.Is(err, ErrDeadline) || err.Error() != tc.want {
			t.Errorf("%s: Outcome = %v, %v; want done with %q wrapping ErrDeadline", tc.name, done, err, tc.want)
		}
	}
}
