package dryrun_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
)

// The one recording client serves both controllers.
var (
	_ deployment.Client = (*dryrun.Client)(nil)
	_ replicaset.Client = (*dryrun.Client)(nil)
)

// reader counts the reads it answers.
type reader struct{ reads int }

func (r *reader) GetDeployment(context.Context, string, string) (*appsv1.Deployment, error) {
	r.reads++
	return &appsv1.Deployment{}, nil
}
func (r *reader) GetReplicaSet(context.Context, string, string) (*appsv1.ReplicaSet, error) {
	r.reads++
	return &appsv1.ReplicaSet{}, nil
}
func (r *reader) ListReplicaSets(context.Context, string) (*appsv1.ReplicaSetList, error) {
	r.reads++
	return &appsv1.ReplicaSetList{}, nil
}
func (r *reader) ListPods(context.Context, string, labels.Selector) (*v1.PodList, error) {
	r.reads++
	return &v1.PodList{}, nil
}

// world is what Current reads: one Deployment d, one ReplicaSet rs, one pod p, all in ns.
func world() map[string]runtime.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"}}
	}
	return map[string]runtime.Object{
		"deployments/d": &appsv1.Deployment{ObjectMeta: meta("d"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}},
		"replicasets/rs": &appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.ReplicaSetStatus{Replicas: 3}},
		"pods/p": &v1.Pod{ObjectMeta: meta("p"), Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}}}},
	}
}

func newClient(r dryrun.Reader, objs map[string]runtime.Object, onWrite func(*dryrun.Write) error) *dryrun.Client {
	return dryrun.New(dryrun.Config{
		Reader: r,
		Current: func(resource, namespace, name string) (runtime.Object, bool) {
			obj, ok := objs[resource+"/"+name]
			if !ok || namespace != "ns" {
				return nil, false
			}
			return obj.DeepCopyObject(), true
		},
		OnWrite: onWrite,
	})
}

// Reads go to the Reader; nothing is recorded.
func TestReadsGoToTheReader(t *testing.T) {
	ctx := context.Background()
	r := &reader{}
	c := newClient(r, world(), nil)
	_, _ = c.GetDeployment(ctx, "ns", "d")
	_, _ = c.GetReplicaSet(ctx, "ns", "rs")
	_, _ = c.ListReplicaSets(ctx, "ns")
	_, _ = c.ListPods(ctx, "ns", labels.Everything())
	if r.reads != 4 || len(c.Writes()) != 0 {
		t.Errorf("%d reads, %d writes; want 4 reads answered by the Reader, no write", r.reads, len(c.Writes()))
	}
}

// Each write is recorded with its verb, resource, subresource, namespace and name and the object it leaves,
// and answered with that object; the world Current reads does not change.
func TestEachVerb(t *testing.T) {
	ctx := context.Background()
	objs := world()
	c := newClient(&reader{}, objs, nil)
	d := objs["deployments/d"].(*appsv1.Deployment).DeepCopy()
	d.Status.Replicas = 3
	updated, err := c.UpdateDeploymentStatus(ctx, d)
	check(t, "update status", err, updated != nil && updated.Status.Replicas == 3 && updated != d)

	patchedD, err := c.PatchDeployment(ctx, "ns", "d", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":5}]`))
	check(t, "patch Deployment", err, patchedD != nil && *patchedD.Spec.Replicas == 5 && patchedD.UID == "d-uid")

	created, err := c.CreateReplicaSet(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs2"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1)}})
	check(t, "create ReplicaSet", err, created != nil && created.Name == "rs2")

	patchedRS, err := c.PatchReplicaSet(ctx, "ns", "rs", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))
	check(t, "patch ReplicaSet", err, patchedRS != nil && patchedRS.Labels["x"] == "y" && patchedRS.Labels["app"] == "web")

	status, err := c.PatchReplicaSetStatus(ctx, "ns", "rs", types.JSONPatchType,
		[]byte(`[{"op":"test","path":"/metadata/uid","value":"rs-uid"},{"op":"replace","path":"/status","value":{"replicas":1}}]`))
	check(t, "patch ReplicaSet status", err, status != nil && status.Status.Replicas == 1 && status.Labels["x"] == "")

	check(t, "delete ReplicaSet", c.DeleteReplicaSet(ctx, "ns", "rs"), true)

	pod, err := c.CreatePod(ctx, "ns", &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}})
	check(t, "create pod", err, pod != nil && pod.Namespace == "ns" && pod.Name == "")

	patchedPod, err := c.PatchPod(ctx, "ns", "p", types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null,"labels":{"app":null}}}`))
	check(t, "patch pod", err, patchedPod != nil && len(patchedPod.Labels) == 0 && len(patchedPod.Spec.Containers) == 2)

	check(t, "delete pod", c.DeletePod(ctx, "ns", "p"), true)

	checkRecorded(t, c.Take(), objs)
	if len(c.Take()) != 0 {
		t.Error("Take left writes behind")
	}
}

func check(t *testing.T, what string, err error, ok bool) {
	t.Helper()
	if err != nil || !ok {
		t.Errorf("%s: err %v, answer as expected %v", what, err, ok)
	}
}

// A strategic merge patch follows the object's Go type: containers merge by name.
func TestStrategicMergePatchMergesByKey(t *testing.T) {
	c := newClient(&reader{}, world(), nil)
	pod, err := c.PatchPod(context.Background(), "ns", "p", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"b","image":"b:2"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cs := pod.Spec.Containers; len(cs) != 2 || cs[0].Image != "a:1" || cs[1].Image != "b:2" {
		t.Errorf("containers %+v, want a:1 kept and b set to b:2", cs)
	}
}

// Writes the API server would refuse are refused the same way, and none is recorded.
func TestRefusedWrites(t *testing.T) {
	ctx := context.Background()
	c := newClient(&reader{}, world(), nil)
	cases := []struct {
		name string
		err  error
		is   func(error) bool
	}{
		{"patch of an unknown object", func() error {
			_, err := c.PatchReplicaSet(ctx, "ns", "gone", types.MergePatchType, []byte(`{}`))
			return err
		}(), apierrors.IsNotFound},
		{"update of an unknown object", func() error {
			_, err := c.UpdateDeploymentStatus(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}})
			return err
		}(), apierrors.IsNotFound},
		{"delete of an unknown object", c.DeletePod(ctx, "other-ns", "p"), apierrors.IsNotFound},
		{"create of an existing name", func() error {
			_, err := c.CreateReplicaSet(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs"}})
			return err
		}(), apierrors.IsAlreadyExists},
		{"JSON patch whose test fails", func() error {
			_, err := c.PatchReplicaSet(ctx, "ns", "rs", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/uid","value":"other"}]`))
			return err
		}(), func(err error) bool {
			var s apierrors.APIStatus
			return apierrors.IsInvalid(err) && errors.As(err, &s) && s.Status().Code == http.StatusUnprocessableEntity &&
				(s.Status().Details == nil || len(s.Status().Details.Causes) == 0)
		}},
		{"patch that does not decode", func() error {
			_, err := c.PatchReplicaSet(ctx, "ns", "rs", types.JSONPatchType, []byte(`{`))
			return err
		}(), apierrors.IsBadRequest},
		{"unsupported patch type", func() error {
			_, err := c.PatchReplicaSet(ctx, "ns", "rs", "application/apply-patch+yaml", []byte(`{}`))
			return err
		}(), apierrors.IsBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.is(tc.err) {
				t.Errorf("err %v", tc.err)
			}
		})
	}
	if n := len(c.Writes()); n != 0 {
		t.Errorf("%d refused writes recorded, want none", n)
	}
}

// OnWrite sees each write before it is answered: what it sets is in the answer and the record, and its error
// fails the write unrecorded.
func TestOnWrite(t *testing.T) {
	ctx := context.Background()
	var seen []string
	c := newClient(&reader{}, world(), func(w *dryrun.Write) error {
		seen = append(seen, w.Verb+" "+w.Resource)
		switch {
		case w.Verb == "create" && w.Resource == "pods":
			pod := w.Object.(*v1.Pod)
			pod.Name, pod.UID = pod.GenerateName+"0", "new-uid"
		case w.Verb == "delete":
			return apierrors.NewConflict(v1.Resource("pods"), w.Name, errors.New("held"))
		}
		return nil
	})
	pod, err := c.CreatePod(ctx, "ns", &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}})
	if err != nil || pod.Name != "web-0" || pod.UID != "new-uid" {
		t.Errorf("created %v, %v; want web-0 as OnWrite named it", pod, err)
	}
	if err := c.DeletePod(ctx, "ns", "p"); !apierrors.IsConflict(err) {
		t.Errorf("delete: %v, want OnWrite's conflict", err)
	}
	ws := c.Writes()
	if len(seen) != 2 || len(ws) != 1 || ws[0].Name != "web-0" || ws[0].Object.(*v1.Pod).UID != "new-uid" {
		t.Errorf("OnWrite saw %v; recorded %+v; want both writes seen, the create recorded as named", seen, ws)
	}
	if ws[0].Object == runtime.Object(pod) {
		t.Error("the answer is the recorded object itself; want a copy")
	}
}

// checkRecorded checks got, the writes TestEachVerb made, and that objs, what Current read, did not change.
func checkRecorded(t *testing.T, got []dryrun.Write, objs map[string]runtime.Object) {
	t.Helper()
	want := []dryrun.Write{
		{Verb: "update", Resource: "deployments", Subresource: "status", Namespace: "ns", Name: "d"},
		{Verb: "patch", Resource: "deployments", Namespace: "ns", Name: "d"},
		{Verb: "create", Resource: "replicasets", Namespace: "ns", Name: "rs2"},
		{Verb: "patch", Resource: "replicasets", Namespace: "ns", Name: "rs"},
		{Verb: "patch", Resource: "replicasets", Subresource: "status", Namespace: "ns", Name: "rs"},
		{Verb: "delete", Resource: "replicasets", Namespace: "ns", Name: "rs"},
		{Verb: "create", Resource: "pods", Namespace: "ns", Name: "web-*"},
		{Verb: "patch", Resource: "pods", Namespace: "ns", Name: "p"},
		{Verb: "delete", Resource: "pods", Namespace: "ns", Name: "p"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d writes recorded, want %d", len(got), len(want))
	}
	for i, w := range got {
		obj := w.Object
		w.Object = nil
		if !reflect.DeepEqual(w, want[i]) {
			t.Errorf("write %d: %+v, want %+v", i, w, want[i])
		}
		if (obj == nil) != (w.Verb == "delete") {
			t.Errorf("write %d (%s): object %v; want one for all but a delete", i, w.Verb, obj)
		}
	}
	if rs := got[4].Object.(*appsv1.ReplicaSet); rs.Status.Replicas != 1 {
		t.Errorf("the status patch recorded %+v, want status.replicas 1", rs.Status)
	}
	if *objs["replicasets/rs"].(*appsv1.ReplicaSet).Spec.Replicas != 3 || len(objs["pods/p"].(*v1.Pod).Labels) != 1 {
		t.Error("a write changed the world Current reads; only OnWrite may")
	}
}

// TestUnstructuredCreates (IM-8): a create sent as JSON with a template as stored is recorded typed with the JSON
// beside it, goes through OnWrite typed (the simulator's world), and is answered as JSON with what OnWrite set and
// the fields kubedeploy's API does not know, as a server that keeps them answers; the refusals are the typed
// creates' (AlreadyExists), and an object of the wrong kind is a BadRequest.
func TestUnstructuredCreates(t *testing.T) {
	ctx := context.Background()
	c := newClient(&reader{}, world(), func(w *dryrun.Write) error {
		switch obj := w.Object.(type) {
		case *appsv1.ReplicaSet:
			obj.UID, obj.Generation = "rs2-uid", 1
		case *v1.Pod:
			obj.Name, obj.UID = obj.GenerateName+"0", "pod-uid"
		}
		return nil
	})
	rs := unstructuredJSON(t, `{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs2", "namespace": "ns"},
	  "spec": {"replicas": 1, "template": {"spec": {"someFutureField": "x", "containers": [{"name": "web", "image": "nginx:1"}]}}}}`)
	created, err := c.CreateReplicaSetUnstructured(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(created.Object, "spec", "template", "spec", "someFutureField"); v != "x" || created.GetUID() != "rs2-uid" || created.GetKind() != "ReplicaSet" {
		t.Errorf("answer %v: want the unknown field, OnWrite's uid and the kind", created.Object)
	}
	pod := unstructuredJSON(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "rs2-"},
	  "spec": {"someFutureField": "x", "containers": [{"name": "web", "image": "nginx:1"}]}}`)
	createdPod, err := c.CreatePodUnstructured(ctx, "ns", pod)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(createdPod.Object, "spec", "someFutureField"); v != "x" || createdPod.GetName() != "rs2-0" || createdPod.GetNamespace() != "ns" {
		t.Errorf("pod answer %v: want the unknown field, OnWrite's name, namespace ns", createdPod.Object)
	}
	ws := c.Take()
	if len(ws) != 2 || ws[0].Name != "rs2" || ws[1].Name != "rs2-0" || ws[0].Verb != dryrun.VerbCreate || ws[1].Resource != dryrun.Pods {
		t.Fatalf("recorded %+v, want the two creates", ws)
	}
	if typed, ok := ws[0].Object.(*appsv1.ReplicaSet); !ok || typed.Spec.Template.Spec.Containers[0].Image != "nginx:1" {
		t.Errorf("recorded object %#v, want the typed ReplicaSet", ws[0].Object)
	}
	if v, _, _ := unstructured.NestedString(ws[1].Sent, "spec", "someFutureField"); v != "x" {
		t.Errorf("recorded Sent %v, want the pod as sent", ws[1].Sent)
	}
	existing := unstructuredJSON(t, `{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns"}}`)
	if _, err := c.CreateReplicaSetUnstructured(ctx, existing); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of an existing name: %v, want AlreadyExists", err)
	}
	if _, err := c.CreatePodUnstructured(ctx, "ns", existing); !apierrors.IsBadRequest(err) {
		t.Errorf("a ReplicaSet sent as a pod: %v, want BadRequest", err)
	}
	if n := len(c.Take()); n != 0 {
		t.Errorf("%d refused creates recorded", n)
	}
}

func unstructuredJSON(t *testing.T, raw string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	return u
}
