package deployment

import (
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

func TestRevisionHistoryRV6(t *testing.T) {
	long := strings.Repeat("9", 999)
	for _, tc := range []struct {
		name, history, old string
		maxLen             int
		want               string
	}{
		{"RV-6 empty history", "", "3", 2000, "3"},
		{"RV-6 append", "1,2", "3", 2000, "1,2,3"},
		{"RV-6 exactly fits", "12", "34", 5, "12,34"},
		{"RV-6 drops oldest until it fits", "1,2,3", "4", 5, "2,3,4"},
		{"RV-6 drops several", long + "," + long, "5", 2000, long + ",5"},
		{"RV-6 unchanged when old alone is too long", "1", "123456", 5, "1"},
		{"RV-6 all dropped, old fits", "12345", "6", 5, "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appendRevisionHistory(tc.history, tc.old, tc.maxLen); got != tc.want {
				t.Errorf("appendRevisionHistory(%q, %q) = %q, want %q", tc.history, tc.old, got, tc.want)
			}
		})
	}
}

func TestRevisions(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	rev := func(v string) *appsv1.ReplicaSet {
		return newRS(d, "rs"+v, "x", 0, 0, map[string]string{rolloutstate.RevisionAnnotation: v})
	}
	for _, tc := range []struct {
		name              string
		rss               []*appsv1.ReplicaSet
		wantMax, wantLast int64
	}{
		{"none", nil, 0, 0},
		{"missing is 0", []*appsv1.ReplicaSet{newRS(d, "a", "x", 0, 0, nil)}, 0, 0},
		{"OM-1 int64", []*appsv1.ReplicaSet{rev("3546343826724305832")}, 3546343826724305832, 0},
		{"unparseable skipped", []*appsv1.ReplicaSet{rev("x"), rev("2"), rev("5")}, 5, 2},
		{"RB-3 tie on highest", []*appsv1.ReplicaSet{rev("4"), rev("4"), rev("1")}, 4, 4},
		{"RB-3 second highest", []*appsv1.ReplicaSet{rev("1"), rev("7"), rev("3")}, 7, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxRevision(tc.rss); got != tc.wantMax {
				t.Errorf("maxRevision = %d, want %d", got, tc.wantMax)
			}
			if got := lastRevision(tc.rss); got != tc.wantLast {
				t.Errorf("lastRevision = %d, want %d", got, tc.wantLast)
			}
		})
	}
}

func TestAnnotationCopyOM8(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		rolloutstate.LastAppliedConfigAnnotation: "{}", rolloutstate.RevisionAnnotation: "9", rolloutstate.RevisionHistoryAnnotation: "1",
		rolloutstate.DesiredReplicasAnnotation: "5", rolloutstate.MaxReplicasAnnotation: "6", rolloutstate.RollbackToAnnotation: "0",
		"kubernetes.io/change-cause": "v2", "custom": "x",
	}
	rs := newRS(d, "a", "x", 1, 0, map[string]string{"custom": "x", "rs-only": "keep", rolloutstate.RevisionAnnotation: "2"})
	if !copyDeploymentAnnotations(d, rs) {
		t.Fatal("expected a change")
	}
	want := map[string]string{"custom": "x", "rs-only": "keep", rolloutstate.RevisionAnnotation: "2", "kubernetes.io/change-cause": "v2"}
	if len(rs.Annotations) != len(want) {
		t.Fatalf("annotations = %v, want %v", rs.Annotations, want)
	}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if copyDeploymentAnnotations(d, rs) {
		t.Error("second copy must report no change")
	}
	t.Run("RB-6 rollback annotations", func(t *testing.T) {
		got := rollbackAnnotations(d, rs)
		for _, k := range []string{rolloutstate.LastAppliedConfigAnnotation, rolloutstate.RevisionAnnotation, rolloutstate.RollbackToAnnotation} {
			if got[k] != d.Annotations[k] {
				t.Errorf("skip-listed %s = %q, want the deployment's %q", k, got[k], d.Annotations[k])
			}
		}
		if got["rs-only"] != "keep" || got["kubernetes.io/change-cause"] != "v2" {
			t.Errorf("rs annotations not copied: %v", got)
		}
	})
}

func TestSetNewReplicaSetRevisionRV2(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		newRevision int64
		wantChanged bool
		wantRev     string
		wantHistory string
	}{
		{"missing revision set, no history", nil, 3, true, "3", ""},
		{"bumped appends history", map[string]string{rolloutstate.RevisionAnnotation: "1"}, 4, true, "4", "1"},
		{"bumped appends to existing history", map[string]string{rolloutstate.RevisionAnnotation: "2", rolloutstate.RevisionHistoryAnnotation: "1"}, 4, true, "4", "1,2"},
		{"RV-7 never lowered", map[string]string{rolloutstate.RevisionAnnotation: "9"}, 4, false, "9", ""},
		{"unparseable reports unchanged", map[string]string{rolloutstate.RevisionAnnotation: "x"}, 4, false, "x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS(d, "a", "x", 1, 0, tc.annotations)
			if got := setNewReplicaSetRevision(d, rs, tc.newRevision); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			if rs.Annotations[rolloutstate.RevisionAnnotation] != tc.wantRev || rs.Annotations[rolloutstate.RevisionHistoryAnnotation] != tc.wantHistory {
				t.Errorf("revision %q history %q, want %q %q", rs.Annotations[rolloutstate.RevisionAnnotation], rs.Annotations[rolloutstate.RevisionHistoryAnnotation], tc.wantRev, tc.wantHistory)
			}
		})
	}
}

func TestReplicasAnnotationOM3(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	for _, tc := range []struct {
		name   string
		value  *string
		want   int32
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"ok", ptr.To("10"), 10, true},
		{"zero parses", ptr.To("0"), 0, true},
		{"negative", ptr.To("-1"), 0, false},
		{"above MaxInt32", ptr.To("2147483648"), 0, false},
		{"MaxInt32", ptr.To("2147483647"), 2147483647, true},
		{"garbage", ptr.To("ten"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS(d, "a", "x", 1, 0, nil)
			if tc.value != nil {
				rs.Annotations = map[string]string{rolloutstate.DesiredReplicasAnnotation: *tc.value}
			}
			got, ok := replicasAnnotation(rs, rolloutstate.DesiredReplicasAnnotation)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %d,%v want %d,%v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestScaleDownSpreadRidesOnScaleWrites: the Deployment's kubedeploy.io/scale-down-spread reaches a
// ReplicaSet with the write that scales it, and its removal too (EX-4, EX-0); a Deployment without it writes
// none.
func TestScaleDownSpreadRidesOnScaleWrites(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	for _, tc := range []struct {
		name      string
		on, onRS  string // "" for none
		wantOnRS  string
		wantWrite bool
	}{
		{"set on the Deployment", zone, "", zone, true},
		{"changed on the Deployment", "template", zone, "template", true},
		{"removed from the Deployment", "", zone, "", true},
		{"never set", "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(4, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Annotations = map[string]string{rolloutstate.RevisionAnnotation: "1"}
			annotations := sizeAnnotations(9, 10, 1)
			if tc.on != "" {
				d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] = tc.on
			}
			if tc.onRS != "" {
				annotations[rolloutstate.ScaleDownSpreadAnnotation] = tc.onRS
			}
			d.Status.Replicas = 9
			rs := withStatus(newRS(d, "nginx-a", "nginx:1.14.2", 9, 0, annotations), 9, 9)
			f := newFixture(t, d, rs)
			if _, err := f.sync(); err != nil {
				t.Fatal(err)
			}
			got := f.rs("nginx-a")
			if specReplicas(got) != 4 {
				t.Fatalf("ReplicaSet scaled to %d, want 4", specReplicas(got))
			}
			v, ok := got.Annotations[rolloutstate.ScaleDownSpreadAnnotation]
			if v != tc.wantOnRS || ok != (tc.wantOnRS != "") {
				t.Errorf("ReplicaSet's %s = %q (present %v), want %q", rolloutstate.ScaleDownSpreadAnnotation, v, ok, tc.wantOnRS)
			}
			if wrote := setPolicyAnnotations(d, newRS(d, "x", "nginx:1.14.2", 9, 0, annotations)); wrote != tc.wantWrite {
				t.Errorf("setPolicyAnnotations reported a change %v, want %v", wrote, tc.wantWrite)
			}
		})
	}
}

// EX-0: kubedeploy.io/ annotations are the Deployment's. Every ReplicaSet carries the Deployment's current
// policy annotations and no other kubedeploy.io/ key: a history ReplicaSet at 0 that carries a policy the
// Deployment no longer has, and bookkeeping an older kubedeploy copied there, is cleaned by one patch; a new
// ReplicaSet is created with the policy and without the bookkeeping; a second sync writes nothing.
func TestPolicyAnnotationsAreTheDeployments(t *testing.T) {
	surge, unavailable := pct25()
	d := newDeployment(4, surge, unavailable)
	d.Annotations = map[string]string{
		rolloutstate.RevisionAnnotation:                   "2",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true",
		rolloutstate.CompleteRevisionAnnotation:           "2",
		"team":                                            "web",
	}
	stale := map[string]string{
		rolloutstate.RevisionAnnotation:                   "1",
		rolloutstate.RolloutPartitionAnnotation:           "banana",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "false",
		rolloutstate.CompleteRevisionAnnotation:           "1",
		rolloutstate.FailedRevisionAnnotation:             "3",
		"team":                                            "old",
	}
	history := withStatus(newRS(d, "nginx-a", "nginx:0", 0, 0, stale), 0, 0)
	d.Spec.Template = podTemplate("nginx:2")
	f := newFixture(t, d, history)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{rolloutstate.RollbackOnProgressDeadlineAnnotation: "true"}
	for _, rs := range f.replicaSets() {
		got := map[string]string{}
		for k, v := range rs.Annotations {
			if rolloutstate.IsKubedeployAnnotation(k) {
				got[k] = v
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("ReplicaSet %s carries kubedeploy.io/ annotations %v, want %v", rs.Name, got, want)
		}
		if rs.Name == "nginx-a" && rs.Annotations["team"] != "old" {
			t.Errorf("history ReplicaSet's own annotation team=%q changed, want old (RV-4)", rs.Annotations["team"])
		}
	}
	f.observe()
	f.Client.ClearActions()
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "replicasets" {
			t.Errorf("second sync patched a ReplicaSet again: %v", a)
		}
	}
}

// EX-0 with RB-6: a rollback through the annotation takes the target's template and annotations but keeps the
// Deployment's kubedeploy.io/ ones, whatever the target carries.
func TestRollbackKeepsThePolicy(t *testing.T) {
	d := newDeployment(4, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		rolloutstate.RolloutPartitionAnnotation: "2",
		rolloutstate.RevisionAnnotation:         "3",
		"team":                                  "web",
	}
	target := newRS(d, "nginx-a", "nginx:1", 0, 0, map[string]string{
		rolloutstate.RolloutPartitionAnnotation:           "banana",
		rolloutstate.RollbackOnProgressDeadlineAnnotation: "true",
		"team": "old",
	})
	got := rollbackAnnotations(d, target)
	want := map[string]string{rolloutstate.RolloutPartitionAnnotation: "2", rolloutstate.RevisionAnnotation: "3", "team": "old"}
	if !maps.Equal(got, want) {
		t.Errorf("annotations after the rollback %v, want %v", got, want)
	}
}
