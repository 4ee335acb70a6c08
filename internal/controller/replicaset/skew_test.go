package replicaset

import (
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// withFutureField is rs's JSON with the pod-level template field someFutureField "strict", which kubedeploy's API
// does not know (IM-8).
func withFutureField(t *testing.T, rs *appsv1.ReplicaSet) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rs)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("ReplicaSet")
	if err := unstructured.SetNestedField(u.Object, "strict", "spec", "template", "spec", "someFutureField"); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCreatePodsAsStoredGoThroughTheClient (IM-8, RS-9): the pods of a ReplicaSet whose template has a field
// kubedeploy's API does not know are created through the controller's Client, as JSON carrying that field: the
// live adapter sends them through its dynamic client (never the typed one), the recording client records them
// with the JSON beside the typed pod.
func TestCreatePodsAsStoredGoThroughTheClient(t *testing.T) {
	cases := []struct {
		name string
		// client returns the Client to sync with, and a function returning the pods it created, as sent.
		client func(f *fixture) (Client, func() []map[string]any)
	}{
		{"live adapter", liveAdapter},
		{"recording client", recordingClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := testRS(2)
			f := newFixture(t, rs)
			store := rawtemplate.NewStore(klog.Background(), nil)
			if _, err := store.Note(withFutureField(t, rs)); err != nil {
				t.Fatal(err)
			}
			client, created := tc.client(f)
			f.c.cfg.Templates, f.c.cfg.Client = store, client
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			got := created()
			if len(got) != 2 {
				t.Fatalf("pods created as JSON: %d, want 2", len(got))
			}
			for _, pod := range got {
				if v, _, _ := unstructured.NestedString(pod, "spec", "someFutureField"); v != "strict" {
					t.Errorf("a created pod lost someFutureField: %v", pod["spec"])
				}
			}
			if n := f.Count("create", "pods", ""); n != 0 {
				t.Errorf("%d typed pod creates, want none", n)
			}
		})
	}
}

// liveAdapter is apiclient.Client over f's clientset and a fake dynamic client naming pods as the API server does,
// and a function returning the pods created through the dynamic client, as sent.
func liveAdapter(f *fixture) (Client, func() []map[string]any) {
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	n := 0
	dyn.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
		n++
		u.SetName(u.GetGenerateName() + strconv.Itoa(n))
		return false, nil, nil
	})
	return apiclient.New(f.Client, dyn), func() []map[string]any {
		var out []map[string]any
		for _, a := range dyn.Actions() {
			if c, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "pods" {
				out = append(out, c.GetObject().(*unstructured.Unstructured).Object)
			}
		}
		return out
	}
}

// recordingClient is a dryrun.Client over f's clientset whose OnWrite names created pods as the API server does,
// and a function returning the pods it recorded as sent as JSON.
func recordingClient(f *fixture) (Client, func() []map[string]any) {
	n := 0
	rec := dryrun.New(dryrun.Config{Reader: apiclient.New(f.Client, nil),
		Current: func(resource, namespace, name string) (runtime.Object, bool) {
			obj, err := f.Client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource(resource), namespace, name)
			return obj, err == nil && resource == dryrun.ReplicaSets
		},
		OnWrite: func(w *dryrun.Write) error {
			if pod, ok := w.Object.(*v1.Pod); ok && w.Verb == dryrun.VerbCreate {
				n++
				pod.Name = pod.GenerateName + strconv.Itoa(n)
			}
			return nil
		}})
	return rec, func() []map[string]any {
		var out []map[string]any
		for _, w := range rec.Writes() {
			if _, ok := w.Object.(*v1.Pod); ok && w.Verb == dryrun.VerbCreate && w.Sent != nil {
				out = append(out, w.Sent)
			}
		}
		return out
	}
}
