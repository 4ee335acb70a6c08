package deployment

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// TestReplicaSetPatch checks the operations of the conditioned JSON patch
// (IM-2) structurally: preconditions first, then one operation per change.
func TestReplicaSetPatch(t *testing.T) {
	base := func() *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 4, Annotations: map[string]string{"a": "1", "x/y~z": "old"}},
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](5)},
			Status:     appsv1.ReplicaSetStatus{AvailableReplicas: 3},
		}
	}
	cases := []struct {
		name   string
		change func(rs *appsv1.ReplicaSet)
		orig   func(rs *appsv1.ReplicaSet)
		extra  []jsonPatchOp
		want   string // ops after the two preconditions, as op:path[=value]
	}{
		{name: "nothing differs", change: func(*appsv1.ReplicaSet) {}, want: "nil"},
		{name: "size", change: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](2) }, want: "add:/spec/replicas=2"},
		{name: "size with the RU-11 availability test", change: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](2) },
			extra: []jsonPatchOp{availableUnchanged(base())}, want: "test:/status/availableReplicas=3 add:/spec/replicas=2"},
		{name: "annotation changed, added, removed, escaped", change: func(rs *appsv1.ReplicaSet) {
			rs.Annotations = map[string]string{"a": "2", "b": "new"}
		}, want: "add:/metadata/annotations/a=\"2\" add:/metadata/annotations/b=\"new\" remove:/metadata/annotations/x~1y~0z=null"},
		{name: "no annotations before: tested absent, added whole", orig: func(rs *appsv1.ReplicaSet) { rs.Annotations = nil },
			change: func(rs *appsv1.ReplicaSet) { rs.Annotations = map[string]string{"r": "1"} },
			want:   "test:/metadata/annotations=null add:/metadata/annotations={\"r\":\"1\"}"},
		{name: "minReadySeconds", change: func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = 7 }, want: "add:/spec/minReadySeconds=7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := base()
			if tc.orig != nil {
				tc.orig(orig)
			}
			modified := orig.DeepCopy()
			tc.change(modified)
			patch, err := replicaSetPatch(orig, modified, tc.extra...)
			if err != nil {
				t.Fatal(err)
			}
			checkReplicaSetPatchOps(t, patch, tc.want)
		})
	}
}

// checkReplicaSetPatchOps checks a conditioned patch (IM-2): nil when want is
// "nil"; otherwise the uid and generation preconditions first, then exactly
// the operations in want, as op:path=value separated by spaces.
func checkReplicaSetPatchOps(t *testing.T, patch []byte, want string) {
	t.Helper()
	if patch == nil {
		if want != "nil" {
			t.Fatalf("no patch, want %s", want)
		}
		return
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) < 2 || ops[0].Path != "/metadata/uid" || string(ops[0].Value) != `"u1"` ||
		ops[1].Path != "/metadata/generation" || string(ops[1].Value) != "4" {
		t.Fatalf("preconditions = %s, want uid u1 and generation 4 first", patch)
	}
	var got []string
	for _, o := range ops[2:] {
		got = append(got, o.Op+":"+o.Path+"="+string(o.Value))
	}
	if g := strings.Join(got, " "); g != want {
		t.Errorf("ops = %s\nwant  %s", g, want)
	}
}

// TestScaleSurvivesStatusWritesButNotSpecChanges: the ReplicaSet
// controller's status write between our read and our scale no longer makes
// the scale fail (IM-2: issue 7 counted 55 such 409s in one 1,000-replica
// rollout), while a concurrent spec change still does.
func TestScaleSurvivesStatusWritesButNotSpecChanges(t *testing.T) {
	d := newDeployment(5, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "1"}
	rs := withStatus(newRS(d, "nginx-"+computeHash(&d.Spec.Template, nil), "nginx:1.14.2", 3, 0, sizeAnnotations(3, 4, 1)), 3, 3)
	rs.Generation = 2
	f := newFixture(t, d, rs)
	conflicts := f.enforceOptimisticConcurrency()
	// The ReplicaSet controller writes status after our cache read.
	f.setRSStatus(rs.Name, 3, 2)
	if _, err := f.sync(); err != nil {
		t.Fatalf("scale after a status write: %v", err)
	}
	if got := *f.rs(rs.Name).Spec.Replicas; got != 5 || *conflicts != 0 {
		t.Fatalf("size %d with %d conflicts, want 5 and 0", got, *conflicts)
	}
	// The cache shows our scale; then someone else changes the ReplicaSet's
	// spec (generation 3), which the cache does not show yet, and the user
	// scales the Deployment to 6.
	f.observe()
	stored := f.rs(rs.Name)
	stored.Generation = 3
	stored.Spec.Replicas = ptr.To[int32](1)
	if err := f.Client.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("replicasets"), stored, "ns"); err != nil {
		t.Fatal(err)
	}
	scaled := f.deployment()
	scaled.Spec.Replicas = ptr.To[int32](6)
	if err := f.Client.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), scaled, "ns"); err != nil {
		t.Fatal(err)
	}
	f.AddToCache(scaled)
	if _, err := f.sync(); err == nil || !strings.Contains(err.Error(), "test failed") {
		t.Fatalf("scale over a concurrent spec change: err = %v, want the failed generation test", err)
	}
	if got := *f.rs(rs.Name).Spec.Replicas; got != 1 {
		t.Fatalf("the concurrent spec change was overwritten: size %d", got)
	}
}

// storedDeployment is a Deployment as a newer API server might store it: fields kubedeploy's compiled API does not
// know at the top of spec, in the pod spec and in a container (IM-8).
const storedDeployment = `{"apiVersion":"apps/v1","kind":"Deployment",
 "metadata":{"name":"nginx","namespace":"ns","uid":"d-uid","generation":3,"resourceVersion":"7",
  "annotations":{"deprecated.deployment.rollback.to":"1","keep":"x"}},
 "spec":{"replicas":3,"someFutureField":{"mode":"new"},
  "selector":{"matchLabels":{"app":"nginx"}},
  "template":{"metadata":{"labels":{"app":"nginx"}},
   "spec":{"futurePodField":true,"containers":[{"name":"nginx","image":"nginx:2","futureContainerField":"on"}]}}}}`

// applyJSONPatch applies patch to doc as kube-apiserver does for application/json-patch+json.
func applyJSONPatch(t *testing.T, doc string, patch []byte) (map[string]any, error) {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", patch, err)
	}
	out, err := p.Apply([]byte(doc))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

// rollbackPatch returns deploymentPatch from orig to a copy of it with the rollback annotation removed and change
// (if any) applied.
func rollbackPatch(t *testing.T, orig *appsv1.Deployment, change func(d *appsv1.Deployment)) []byte {
	t.Helper()
	modified := orig.DeepCopy()
	delete(modified.Annotations, rolloutstate.RollbackToAnnotation)
	if change != nil {
		change(modified)
	}
	patch, err := deploymentPatch(orig, modified, nil)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

// TestDeploymentPatchKeepsUnknownFields: the rollback's patch, decided on the typed Deployment (which lost the
// unknown fields when it was decoded), names only what it changes, so applied to the stored JSON it keeps
// spec.someFutureField and, when the template is not replaced, the template's unknown fields too; it is refused when
// the stored spec changed since (IM-8, issue 23).
func TestDeploymentPatchKeepsUnknownFields(t *testing.T) {
	var orig appsv1.Deployment
	if err := json.Unmarshal([]byte(storedDeployment), &orig); err != nil {
		t.Fatal(err)
	}
	t.Run("annotation cleared, template kept", func(t *testing.T) {
		patch := rollbackPatch(t, &orig, nil)
		got, err := applyJSONPatch(t, storedDeployment, patch)
		if err != nil {
			t.Fatalf("apply %s: %v", patch, err)
		}
		spec := got["spec"].(map[string]any)
		podSpec := spec["template"].(map[string]any)["spec"].(map[string]any)
		container := podSpec["containers"].([]any)[0].(map[string]any)
		if spec["someFutureField"] == nil || podSpec["futurePodField"] != true || container["futureContainerField"] != "on" {
			t.Errorf("unknown fields lost by %s: %v", patch, spec)
		}
		annotations := got["metadata"].(map[string]any)["annotations"].(map[string]any)
		if _, ok := annotations[rolloutstate.RollbackToAnnotation]; ok || annotations["keep"] != "x" {
			t.Errorf("annotations = %v", annotations)
		}
	})
	t.Run("template replaced", func(t *testing.T) {
		patch := rollbackPatch(t, &orig, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1" })
		got, err := applyJSONPatch(t, storedDeployment, patch)
		if err != nil {
			t.Fatalf("apply %s: %v", patch, err)
		}
		spec := got["spec"].(map[string]any)
		image := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
		if spec["someFutureField"] == nil || image != "nginx:1" || spec["replicas"] != float64(3) {
			t.Errorf("after %s: spec = %v", patch, spec)
		}
	})
	t.Run("refused after a spec change", func(t *testing.T) {
		patch := rollbackPatch(t, &orig, nil)
		changed := strings.Replace(storedDeployment, `"generation":3`, `"generation":4`, 1)
		if _, err := applyJSONPatch(t, changed, patch); err == nil {
			t.Errorf("patch %s applied to a Deployment whose generation moved on", patch)
		}
	})
	t.Run("nothing to write", func(t *testing.T) {
		if patch, err := deploymentPatch(&orig, orig.DeepCopy(), nil); patch != nil || err != nil {
			t.Errorf("deploymentPatch of an unchanged Deployment = %s, %v; want nil", patch, err)
		}
	})
}
