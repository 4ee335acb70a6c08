package shadow

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// noteFutureField notes obj in store as a newer API server stores it, with the pod-level template field
// someFutureField "strict", which kubedeploy's API does not know (IM-8).
func noteFutureField(t *testing.T, store *rawtemplate.Store, obj runtime.Object) {
	t.Helper()
	u, err := rawtemplate.Carry(obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "strict", "spec", "template", "spec", "someFutureField"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Note(u); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownTemplateFieldsCountInTheCheck (IM-8, RV-1): revision 2 added a template field kubedeploy's API does
// not know, so its ReplicaSet's typed template is revision 1's; the controller tells them apart by that field.
// With the store the informers fill, the check finds revision 2's ReplicaSet as the new one, as the controller
// does: settled, no divergence. Without it (typed templates alone) it takes revision 1's, the oldest, and the
// Deployment's status does not add up.
func TestUnknownTemplateFieldsCountInTheCheck(t *testing.T) {
	cases := []struct {
		name       string
		withStore  bool
		wantSettle bool
	}{
		{"with the informers' store", true, true},
		{"typed templates alone", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := completeWorld(3, "nginx:1.0", "nginx:1.0")
			var store *rawtemplate.Store
			if tc.withStore {
				store = rawtemplate.NewStore(klog.Background(), nil)
				noteFutureField(t, store, w.d)
				noteFutureField(t, store, w.rss[1])
				if _, err := store.Note(mustCarry(t, w.rss[0])); err != nil {
					t.Fatal(err)
				}
			}
			c := checkerWith(t, w, "http://127.0.0.1:1", store)
			r, err := c.Check(context.Background(), cache.ObjectName{Namespace: "default", Name: "web"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Settled != tc.wantSettle {
				t.Fatalf("settled %v (%s), want %v", r.Settled, r.NotSettled, tc.wantSettle)
			}
			if len(r.Divergences) != 0 {
				t.Errorf("divergences:%s", describe(r.Divergences))
			}
		})
	}
}

func mustCarry(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := rawtemplate.Carry(obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
