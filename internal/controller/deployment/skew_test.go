package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// noteFutureField notes obj (a Deployment or ReplicaSet of kind) in store as the API server would send it with
// the pod-level template field someFutureField {"mode": value}, which kubedeploy's API does not know (IM-8).
func noteFutureField(t *testing.T, store *rawtemplate.Store, obj runtime.Object, kind, value string) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind(kind)
	if err := unstructured.SetNestedField(u.Object, map[string]any{"mode": value}, "spec", "template", "spec", "someFutureField"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Note(u); err != nil {
		t.Fatal(err)
	}
}

// trackerCurrent is a dryrun.Config.Current over f's fake API server.
func trackerCurrent(f *fixture) func(resource, namespace, name string) (runtime.Object, bool) {
	return func(resource, namespace, name string) (runtime.Object, bool) {
		gvr := appsv1.SchemeGroupVersion.WithResource(resource)
		if resource == dryrun.Pods {
			gvr.Group, gvr.Version = "", "v1"
		}
		obj, err := f.Client.Tracker().Get(gvr, namespace, name)
		return obj, err == nil
	}
}

// TestCreateAsStoredGoesThroughTheClient (IM-8, RV-9, OM-14): the new ReplicaSet of a Deployment whose template
// has a field kubedeploy's API does not know is created through the controller's Client, as JSON carrying that
// field, under the name whose pod-template-hash folds in the field's value: the live adapter sends it through
// its dynamic client (never the typed one), the recording client (the shadow check's and the simulator's)
// records it with the JSON and answers it, so the syncs over either name the ReplicaSet alike.
func TestCreateAsStoredGoesThroughTheClient(t *testing.T) {
	cases := []struct {
		name string
		// client returns the Client to sync with, and a function returning the ReplicaSets it created, as sent.
		client func(f *fixture) (Client, func() []*unstructured.Unstructured)
	}{
		{"live adapter", func(f *fixture) (Client, func() []*unstructured.Unstructured) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			return apiclient.New(f.Client, dyn), func() []*unstructured.Unstructured {
				var out []*unstructured.Unstructured
				for _, a := range dyn.Actions() {
					if c, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "replicasets" {
						out = append(out, c.GetObject().(*unstructured.Unstructured))
					}
				}
				return out
			}
		}},
		{"recording client", func(f *fixture) (Client, func() []*unstructured.Unstructured) {
			rec := dryrun.New(dryrun.Config{Reader: apiclient.New(f.Client, nil), Current: trackerCurrent(f)})
			return rec, func() []*unstructured.Unstructured {
				var out []*unstructured.Unstructured
				for _, w := range rec.Writes() {
					if w.Verb == dryrun.VerbCreate && w.Resource == dryrun.ReplicaSets && w.Sent != nil {
						out = append(out, &unstructured.Unstructured{Object: w.Sent})
					}
				}
				return out
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
			f := newFixture(t, d)
			store := rawtemplate.NewStore(klog.Background(), nil)
			noteFutureField(t, store, d, "Deployment", "strict")
			client, created := tc.client(f)
			f.c.templates, f.c.client = store, client
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			want := replicaSetName(d.Name, hashTemplate(&d.Spec.Template, store.Fingerprint(d), nil))
			if typedName := replicaSetName(d.Name, computeHash(&d.Spec.Template, nil)); want == typedName {
				t.Fatalf("the fingerprint does not change the name %s", want)
			}
			got := created()
			if len(got) != 1 || got[0].GetName() != want {
				t.Fatalf("ReplicaSets created as JSON: %d (%v), want one named %s", len(got), got, want)
			}
			if v, _, _ := unstructured.NestedString(got[0].Object, "spec", "template", "spec", "someFutureField", "mode"); v != "strict" {
				t.Errorf("the created ReplicaSet's template lost someFutureField: %v", got[0].Object["spec"])
			}
			if n := f.Count("create", "replicasets", ""); n != 0 {
				t.Errorf("%d typed ReplicaSet creates, want none", n)
			}
		})
	}
}
