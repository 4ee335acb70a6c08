package deployment

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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
			if patch == nil {
				if tc.want != "nil" {
					t.Fatalf("no patch, want %s", tc.want)
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
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("ops = %s\nwant  %s", g, tc.want)
			}
		})
	}
}

// TestScaleSurvivesStatusWritesButNotSpecChanges: the ReplicaSet
// controller's status write between our read and our scale no longer makes
// the scale fail (IM-2: issue 7 counted 55 such 409s in one 1,000-replica
// rollout), while a concurrent spec change still does.
func TestScaleSurvivesStatusWritesButNotSpecChanges(t *testing.T) {
	d := newDeployment(5, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
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
