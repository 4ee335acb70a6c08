package rolloutmetrics

import (
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

var labels = map[string]string{"app": "web"}

func template(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}},
	}
}

// cluster is one Deployment "web" (4 replicas), its ReplicaSets and pods.
type cluster struct {
	d    *appsv1.Deployment
	rss  []*appsv1.ReplicaSet
	pods []*v1.Pod
}

func newCluster(image string) *cluster {
	return &cluster{d: &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid", Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(image)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1},
	}}
}

// hold makes the objects a RollingUpdate rollout held by the partition value (EX-1, rolloutstate.HeldAtPartition
// when value parses): newRS at 1 replica, available, oldRS at the other 3; an invalid value holds it where it is.
func (c *cluster) hold(newRS, oldRS *appsv1.ReplicaSet, value string) {
	c.d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	if c.d.Annotations == nil {
		c.d.Annotations = map[string]string{}
	}
	c.d.Annotations[rolloutstate.RolloutPartitionAnnotation] = value
	newRS.Spec.Replicas, newRS.Status = ptr.To[int32](1), appsv1.ReplicaSetStatus{Replicas: 1, AvailableReplicas: 1}
	oldRS.Spec.Replicas, oldRS.Status = ptr.To[int32](3), appsv1.ReplicaSetStatus{Replicas: 3, AvailableReplicas: 3}
	c.d.Status.Replicas, c.d.Status.UpdatedReplicas, c.d.Status.AvailableReplicas = 4, 1, 4
}

// rs adds a ReplicaSet of image created at created, of revision rev.
func (c *cluster) rs(image, rev string, created time.Time) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-" + rev, Namespace: "ns", UID: types.UID("rs-" + rev), CreationTimestamp: metav1.NewTime(created),
			Annotations:     map[string]string{rolloutstate.RevisionAnnotation: rev},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c.d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), Template: template(image)},
	}
	c.rss = append(c.rss, rs)
	return rs
}

// pod adds a pod of rs waiting with reason ("" for Ready, Terminating for a
// deleted Ready pod).
func (c *cluster) pod(rs *appsv1.ReplicaSet, name, reason string) {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec:   v1.PodSpec{NodeName: "node-0"},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
	switch reason {
	case "":
	case unavailable.Terminating:
		p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	case unavailable.NotReady:
		p.Status.Conditions = nil
	default:
		p.Status = v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}}}
	}
	c.pods = append(c.pods, p)
}

// progressing sets the Progressing condition's reason; complete also sets
// the counts of a complete rollout (ST-9).
func (c *cluster) progressing(reason string) {
	c.d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: v1.ConditionTrue, Reason: reason}}
	if reason == rolloutstate.ProgressDeadlineExceeded {
		c.d.Status.Conditions[0].Status = v1.ConditionFalse
	}
	if reason == rolloutstate.NewReplicaSetAvailable {
		c.d.Status.Replicas, c.d.Status.UpdatedReplicas, c.d.Status.AvailableReplicas = 4, 4, 4
		newRS := rolloutstate.NewReplicaSet(c.d, c.rss)
		for _, rs := range c.rss { // the ReplicaSets the status counts (ST-2)
			rs.Status = appsv1.ReplicaSetStatus{}
			if rs == newRS {
				rs.Status = appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
			}
		}
	}
}

// newTracker returns a tracker that keeps its ended rollouts in *ended.
func newTracker(ended *[]Ended) *Tracker {
	t := NewTracker()
	t.OnEnd = func(e Ended) { *ended = append(*ended, e) }
	return t
}

// An invalid partition value that holds a rollout is a wait of its own, invalid_policy, so the stuck alert
// fires on it (EX-1, rolloutstate.PhaseInvalid).
func TestRolloutWaitsOnInvalidPolicy(t *testing.T) {
	tr := NewTracker()
	c := newCluster("nginx:2")
	rs1, rs2 := c.rs("nginx:1", "1", at(-100)), c.rs("nginx:2", "2", at(-10))
	c.progressing("ReplicaSetUpdated")
	c.hold(rs2, rs1, "banana")
	tr.Observe(c.d, c.rss, c.pods, at(0))
	r := tr.InProgress(at(5))[0]
	if r.Wait != (Wait{InvalidPolicy, rolloutstate.InvalidRolloutPartition}) || r.Waited[InvalidPolicy] != 15*time.Second {
		t.Errorf("wait %+v, waited %v; want invalid_policy for 15s", r.Wait, r.Waited)
	}
}

// A rollout observed from its start: its waits follow the new ReplicaSet's
// pods (the largest group's reason), and it ends complete with its duration.
func TestRolloutCompletes(t *testing.T) {
	var ended []Ended
	tr := newTracker(&ended)
	c := newCluster("nginx:1")
	rs1 := c.rs("nginx:1", "1", at(-100))
	c.progressing(rolloutstate.NewReplicaSetAvailable)
	tr.Observe(c.d, c.rss, c.pods, at(0)) // complete at first sight: no rollout
	if got := tr.InProgress(at(0)); len(got) != 0 {
		t.Fatalf("a complete Deployment has a rollout in progress: %+v", got)
	}

	c.d.Spec.Template = template("nginx:2")
	c.d.Generation, c.d.Status.ObservedGeneration = 2, 2
	c.progressing("ReplicaSetUpdated")
	c.d.Status.UpdatedReplicas = 0
	rs2 := c.rs("nginx:2", "2", at(1))
	c.pod(rs1, "old-a", "")
	c.pod(rs2, "new-a", "ImagePullBackOff")
	c.pod(rs2, "new-b", "ImagePullBackOff")
	c.pod(rs2, "new-c", "ContainerCreating")
	tr.Observe(c.d, c.rss, c.pods, at(1))
	c.pods[1].Status = c.pods[0].Status // new-a Ready
	c.pods[2].Status.Conditions, c.pods[2].Status.ContainerStatuses, c.pods[2].Status.Phase = nil, nil, v1.PodRunning
	tr.Observe(c.d, c.rss, c.pods, at(4)) // new-b NotReady, new-c ContainerCreating: a tie, by reason
	got := tr.InProgress(at(6))
	if len(got) != 1 {
		t.Fatalf("%d rollouts in progress, want 1", len(got))
	}
	r := got[0]
	if r.ReplicaSet != "web-2" || r.Revision != "2" || !r.Start.Equal(at(1)) || r.Wait != (Wait{ImagePull, "ContainerCreating"}) || !r.WaitSince.Equal(at(4)) {
		t.Errorf("rollout %+v", r)
	}
	if r.Waited[ImagePull] != 5*time.Second || len(r.Waited) != 1 {
		t.Errorf("waited %v, want image_pull 5s (3s of ImagePullBackOff, then ContainerCreating)", r.Waited)
	}

	c.progressing(rolloutstate.NewReplicaSetAvailable)
	c.d.Status.UpdatedReplicas = 4
	tr.Observe(c.d, c.rss, c.pods, at(9))
	if len(ended) != 1 || ended[0].Outcome != Complete || ended[0].Duration() != 8*time.Second || ended[0].Waited[ImagePull] != 8*time.Second {
		t.Fatalf("ended %+v, want one complete after 8s", ended)
	}
	// Scaling the complete Deployment starts no rollout.
	c.d.Spec.Replicas = ptr.To[int32](8)
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(10))
	if got := tr.InProgress(at(10)); len(got) != 0 {
		t.Errorf("a scale started a rollout: %+v", got)
	}
}

// A rollout in progress when the tracker first sees it starts at its new
// ReplicaSet's creation; the time before the first observation counts to
// the first wait. Pause and partition are waits of their own; old pods
// terminating are the wait once the new pods are available.
func TestRolloutWaits(t *testing.T) {
	tr := NewTracker()
	c := newCluster("nginx:2")
	rs1, rs2 := c.rs("nginx:1", "1", at(-100)), c.rs("nginx:2", "2", at(-10))
	c.progressing("ReplicaSetUpdated")
	c.pod(rs2, "new-a", unavailable.NotReady)
	c.pod(rs1, "old-a", unavailable.Terminating)
	tr.Observe(c.d, c.rss, c.pods, at(0))
	c.pods[0].Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	tr.Observe(c.d, c.rss, c.pods, at(2))
	c.d.Spec.Paused = true
	tr.Observe(c.d, c.rss, c.pods, at(5))
	c.d.Spec.Paused = false
	c.hold(rs2, rs1, "1")
	tr.Observe(c.d, c.rss, c.pods, at(6))
	c.pods = c.pods[:1]
	delete(c.d.Annotations, rolloutstate.RolloutPartitionAnnotation)
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(8))
	r := tr.InProgress(at(9))[0]
	want := map[WaitingOn]time.Duration{Startup: 12 * time.Second, Termination: 3 * time.Second, Paused: time.Second, Partition: 2 * time.Second, Controller: time.Second}
	if !r.Start.Equal(at(-10)) || len(r.Waited) != len(want) {
		t.Fatalf("start %v, waited %v; want start at -10s and %v", r.Start.Sub(t0), r.Waited, want)
	}
	for on, d := range want {
		if r.Waited[on] != d {
			t.Errorf("waited %v, want %v", r.Waited, want)
			break
		}
	}
}

// The new ReplicaSet changing before the rollout ended ends it: rolled
// back when the next one is older, superseded when it is newer; the next
// rollout starts then.
func TestRolloutReplaced(t *testing.T) {
	var ended []Ended
	tr := newTracker(&ended)
	c := newCluster("nginx:2")
	c.rs("nginx:1", "1", at(-100))
	c.rs("nginx:2", "2", at(-10))
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(0))

	c.d.Spec.Template = template("nginx:3")
	c.rs("nginx:3", "3", at(5))
	tr.Observe(c.d, c.rss, c.pods, at(5))
	c.d.Spec.Template = template("nginx:1") // kubectl rollout undo --to-revision=1
	tr.Observe(c.d, c.rss, c.pods, at(7))
	if len(ended) != 2 || ended[0].ReplicaSet != "web-2" || ended[0].Outcome != Superseded || ended[1].ReplicaSet != "web-3" || ended[1].Outcome != RolledBack || ended[1].Duration() != 2*time.Second {
		t.Fatalf("ended %+v, want web-2 superseded, then web-3 rolled back after 2s", ended)
	}
	if r := tr.InProgress(at(8)); len(r) != 1 || r[0].ReplicaSet != "web-1" || !r[0].Start.Equal(at(7)) {
		t.Errorf("in progress %+v, want web-1's rollout from 7s", r)
	}
}

// ProgressDeadlineExceeded ends a rollout as failed, unless the Deployment
// rolls back automatically (EX-2): then the rollback's new ReplicaSet ends
// it as rolled back. A forgotten Deployment's rollout is not reported.
func TestRolloutFails(t *testing.T) {
	var ended []Ended
	tr := newTracker(&ended)
	c := newCluster("nginx:broken")
	c.rs("nginx:1", "1", at(-100))
	c.rs("nginx:broken", "2", at(-10))
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(0))
	c.progressing(rolloutstate.ProgressDeadlineExceeded)
	tr.Observe(c.d, c.rss, c.pods, at(3))
	if len(ended) != 1 || ended[0].Outcome != Failed || ended[0].Duration() != 13*time.Second {
		t.Fatalf("ended %+v, want one failed after 13s", ended)
	}

	ended = nil
	tr = newTracker(&ended)
	var forgot []string
	tr.OnForget = func(ns, name string) { forgot = append(forgot, ns+"/"+name) }
	c.d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "2",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true", rolloutstate.CompleteRevisionAnnotation: "1"}
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(0))
	c.progressing(rolloutstate.ProgressDeadlineExceeded)
	c.d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	tr.Observe(c.d, c.rss, c.pods, at(3))
	if len(ended) != 0 {
		t.Fatalf("a rollout about to be rolled back ended: %+v", ended)
	}
	c.d.Spec.Template = template("nginx:1")
	c.progressing("ReplicaSetUpdated")
	tr.Observe(c.d, c.rss, c.pods, at(4))
	if len(ended) != 1 || ended[0].Outcome != RolledBack {
		t.Fatalf("ended %+v, want one rolled back", ended)
	}
	tr.Forget(c.d.UID)
	if len(ended) != 1 || len(tr.InProgress(at(5))) != 0 || len(forgot) != 1 || forgot[0] != "ns/web" {
		t.Errorf("after Forget: ended %d, in progress %d, forgot %v", len(ended), len(tr.InProgress(at(5))), forgot)
	}
	tr.Forget("unknown") // nothing to forget
	if len(forgot) != 1 {
		t.Errorf("an unknown Deployment was forgotten: %v", forgot)
	}
}

// A rollback to a ReplicaSet created in the same second as the rollout's own (a fast first rollout, then a
// broken image; creationTimestamps have whole seconds) is still a rollback: that ReplicaSet was the
// Deployment's before the rollout started. CI saw it counted superseded (TestOneVerdictEverywhere/rolled-back).
func TestRollbackWithinTheSameSecond(t *testing.T) {
	var ended []Ended
	tr := newTracker(&ended)
	c := newCluster("nginx:1")
	c.rs("nginx:1", "1", at(0))
	c.progressing(rolloutstate.NewReplicaSetAvailable)
	tr.Observe(c.d, c.rss, c.pods, at(0.2))
	c.d.Spec.Template = template("nginx:broken")
	c.rs("nginx:broken", "2", at(0))
	c.progressing("ReplicaSetUpdated")
	c.d.Status.UpdatedReplicas = 0
	tr.Observe(c.d, c.rss, c.pods, at(0.5))
	c.d.Spec.Template = template("nginx:1")
	tr.Observe(c.d, c.rss, c.pods, at(9))
	if len(ended) != 1 || ended[0].ReplicaSet != "web-2" || ended[0].Outcome != RolledBack {
		t.Fatalf("ended %+v, want web-2 rolled back", ended)
	}
}

// A Deployment created while the tracker watches whose first rollout is
// complete by the time its ReplicaSet is seen (a cache behind, a fast
// rollout) still counts that rollout, from the ReplicaSet's creation; a
// restart's first look at a complete one counts nothing.
func TestRolloutSeenComplete(t *testing.T) {
	var ended []Ended
	tr := newTracker(&ended)
	c := newCluster("nginx:1")
	c.progressing("NewReplicaSetCreated")
	tr.Observe(c.d, nil, nil, at(0)) // created: no ReplicaSet in the cache yet
	c.rs("nginx:1", "1", at(1))
	c.progressing(rolloutstate.NewReplicaSetAvailable)
	tr.Observe(c.d, c.rss, c.pods, at(5))
	if len(ended) != 1 || ended[0].Outcome != Complete || !ended[0].Start.Equal(at(1)) || ended[0].Duration() != 4*time.Second {
		t.Fatalf("ended %+v, want one complete from 1s to 5s", ended)
	}
	ended = nil
	restarted := newTracker(&ended)
	restarted.Observe(c.d, c.rss, c.pods, at(6))
	if len(ended) != 0 || len(restarted.InProgress(at(6))) != 0 {
		t.Errorf("a restart counted a complete rollout: ended %+v", ended)
	}
}

// richTemplate is a pod template of the size real Deployments carry: an app container with resources, env and
// probes, and a sidecar.
func richTemplate(image string) v1.PodTemplateSpec {
	tpl := template(image)
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5}
	tpl.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	tpl.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu"}}
	tpl.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")},
	}
	tpl.Spec.Containers[0].ReadinessProbe, tpl.Spec.Containers[0].LivenessProbe = probe, probe
	tpl.Spec.Containers = append(tpl.Spec.Containers, v1.Container{Name: "proxy", Image: "envoy:1.30", Args: []string{"--config", "/etc/envoy.yaml"},
		VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc"}}})
	tpl.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "envoy"}}}}}
	return tpl
}

// BenchmarkTrackerObserve is one observation of a rollout in progress, as the Feeder makes one each second for
// every Deployment whose objects changed: three ReplicaSets (the new one and two of the revision history) of
// richTemplate, five new pods not Ready yet and five old ones.
func BenchmarkTrackerObserve(b *testing.B) {
	c := newCluster("nginx:3")
	c.d.Spec.Template = richTemplate("nginx:3")
	rss := []*appsv1.ReplicaSet{c.rs("nginx:1", "1", at(-300)), c.rs("nginx:2", "2", at(-200)), c.rs("nginx:3", "3", at(-10))}
	for i, rs := range rss {
		rs.Spec.Template = richTemplate("nginx:" + strconv.Itoa(i+1))
		rs.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "h" + strconv.Itoa(i)}
	}
	c.progressing("ReplicaSetUpdated")
	for i := range 5 {
		c.pod(rss[2], "new-"+strconv.Itoa(i), unavailable.NotReady)
		c.pod(rss[1], "old-"+strconv.Itoa(i), "")
	}
	tr := NewTracker()
	b.ReportAllocs()
	now := 0.0
	for b.Loop() {
		now++
		tr.Observe(c.d, c.rss, c.pods, at(now))
	}
	if got := tr.InProgress(at(now)); len(got) != 1 || got[0].ReplicaSet != "web-3" || got[0].Wait.On != Startup {
		b.Fatalf("in progress %+v, want web-3's rollout waiting on startup", got)
	}
}
