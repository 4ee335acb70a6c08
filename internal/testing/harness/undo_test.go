package harness

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"
)

// undoFixture returns Deployment ns/web (image current, annotations ann) and
// one ReplicaSet of it per entry of revisions (revision annotation → image),
// each with a change-cause naming its image and a pod-template-hash label.
func undoFixture(current string, paused bool, ann map[string]string, revisions map[string]string) []runtime.Object {
	d := NewDeployment("ns", "web", 3, current)
	d.UID = "deployment-uid"
	d.Annotations = ann
	d.Spec.Paused = paused
	objs := []runtime.Object{d}
	for rev, image := range revisions {
		rs := NewReplicaSet("ns", "web-"+rev, 0)
		rs.UID = types.UID("rs-uid-" + rev)
		rs.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "h" + rev}
		rs.Spec.Selector.MatchLabels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "h" + rev}
		rs.Spec.Template = *d.Spec.Template.DeepCopy()
		rs.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "h" + rev}
		rs.Spec.Template.Spec.Containers[0].Image = image
		rs.Annotations = map[string]string{
			"deployment.kubernetes.io/revision":         rev,
			"deployment.kubernetes.io/desired-replicas": "3",
			"kubernetes.io/change-cause":                "image " + image,
		}
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		objs = append(objs, rs)
	}
	return objs
}

// undoCase is one case of TestRolloutUndoMatchesKubectl: the cluster's
// objects, the revision asked for, and the outcome wanted.
type undoCase struct {
	name        string
	objs        []runtime.Object
	toRevision  int64
	wantImage   string // "" when nothing is written
	wantErr     bool
	wantSkipped bool
}

// undoCases are TestRolloutUndoMatchesKubectl's cases.
func undoCases() []undoCase {
	kept := map[string]string{
		"deployment.kubernetes.io/revision": "3",
		v1.LastAppliedConfigAnnotation:      "{}",
		"kubernetes.io/change-cause":        "image nginx:3",
		"custom":                            "dropped: the ReplicaSet lacks it",
	}
	three := map[string]string{"1": "nginx:1", "2": "nginx:2", "3": "nginx:3"}
	return []undoCase{
		{name: "to revision 1", objs: undoFixture("nginx:3", false, kept, three), toRevision: 1, wantImage: "nginx:1"},
		{name: "previous revision", objs: undoFixture("nginx:3", false, kept, three), wantImage: "nginx:2"},
		{name: "missing revision", objs: undoFixture("nginx:3", false, kept, three), toRevision: 5, wantErr: true},
		{name: "negative revision", objs: undoFixture("nginx:3", false, kept, three), toRevision: -1, wantErr: true},
		{name: "no previous revision", objs: undoFixture("nginx:1", false, nil, map[string]string{"1": "nginx:1"}), wantErr: true},
		{name: "paused", objs: undoFixture("nginx:3", true, kept, three), toRevision: 1, wantErr: true},
		{name: "already at the revision", objs: undoFixture("nginx:3", false, kept, three), toRevision: 3, wantSkipped: true},
		{name: "unparsable revision ignored", objs: undoFixture("nginx:3", false, kept, map[string]string{"x": "nginx:x", "2": "nginx:2", "3": "nginx:3"}), wantImage: "nginx:2"},
		{name: "ReplicaSet of another controller ignored", objs: withOrphanReplicaSet(undoFixture("nginx:3", false, kept, three)), toRevision: 7, wantErr: true},
	}
}

// withOrphanReplicaSet adds to objs a ReplicaSet "orphan" at revision 7 that
// matches ns/web's selector but has no controller.
func withOrphanReplicaSet(objs []runtime.Object) []runtime.Object {
	rs := NewReplicaSet("ns", "orphan", 0)
	rs.UID = "orphan-uid"
	rs.Labels = map[string]string{"app": "web"}
	rs.Spec.Selector.MatchLabels = rs.Labels
	rs.Spec.Template.Labels = rs.Labels
	rs.Spec.Template.Spec.Containers[0].Image = "nginx:orphan"
	rs.Annotations = map[string]string{"deployment.kubernetes.io/revision": "7"}
	return append(objs, rs)
}

// TestRolloutUndoMatchesKubectl runs RolloutUndo and kubectl's own
// Deployment rollbacker on identical fake clusters and checks they fail in
// the same cases and otherwise leave the same Deployment behind (RB-9).
func TestRolloutUndoMatchesKubectl(t *testing.T) {
	cases := undoCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ours, theirs := fake.NewClientset(copies(tc.objs)...), fake.NewClientset(copies(tc.objs)...)
			_, err := RolloutUndo(ctx, ours, "ns", "web", tc.toRevision)
			rb, rbErr := polymorphichelpers.RollbackerFor(schema.GroupKind{Group: "apps", Kind: "Deployment"}, theirs)
			if rbErr != nil {
				t.Fatal(rbErr)
			}
			msg, kubectlErr := rb.Rollback(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}, nil, tc.toRevision, cmdutil.DryRunNone)
			t.Logf("RolloutUndo: %v; kubectl: %q, %v", err, msg, kubectlErr)
			switch {
			case tc.wantSkipped:
				if !errors.Is(err, ErrUndoSkipped) || kubectlErr != nil {
					t.Fatalf("RolloutUndo = %v, kubectl = %v; want ErrUndoSkipped and a kubectl skip", err, kubectlErr)
				}
			case tc.wantErr:
				if err == nil || kubectlErr == nil || errors.Is(err, ErrUndoSkipped) {
					t.Fatalf("RolloutUndo = %v, kubectl = %v; want both to fail", err, kubectlErr)
				}
			default:
				if err != nil || kubectlErr != nil {
					t.Fatalf("RolloutUndo = %v, kubectl = %v; want both to succeed", err, kubectlErr)
				}
			}
			got, want := deploymentOf(ctx, t, ours), deploymentOf(ctx, t, theirs)
			if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) || !apiequality.Semantic.DeepEqual(got.Annotations, want.Annotations) {
				t.Errorf("after RolloutUndo:\n%+v\n%v\nafter kubectl:\n%+v\n%v", got.Spec.Template, got.Annotations, want.Spec.Template, want.Annotations)
			}
			image := got.Spec.Template.Spec.Containers[0].Image
			if tc.wantImage != "" && image != tc.wantImage {
				t.Errorf("image %s, want %s", image, tc.wantImage)
			}
			if tc.wantImage != "" && got.Annotations["kubernetes.io/change-cause"] != "image "+tc.wantImage {
				t.Errorf("annotations %v, want the ReplicaSet's change-cause", got.Annotations)
			}
		})
	}
}

func copies(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

func deploymentOf(ctx context.Context, t *testing.T, c *fake.Clientset) *appsv1.Deployment {
	t.Helper()
	d, err := c.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
