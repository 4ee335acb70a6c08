package rolloutstate

import (
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EX-1: "N" is N pods, "N%" is N percent of spec.replicas rounded down,
// both capped at spec.replicas; anything else is an error.
func TestParsePartition(t *testing.T) {
	for _, tc := range []struct {
		v        string
		replicas int32
		want     int32
		wantErr  bool
	}{
		{v: "5", replicas: 20, want: 5},
		{v: "0", replicas: 20, want: 0},
		{v: "20", replicas: 20, want: 20},
		{v: "25", replicas: 20, want: 20},
		{v: "007", replicas: 20, want: 7},
		{v: "50%", replicas: 20, want: 10},
		{v: "50%", replicas: 40, want: 20},
		{v: "33%", replicas: 10, want: 3}, // 3.3 rounded down
		{v: "99%", replicas: 10, want: 9},
		{v: "0%", replicas: 10, want: 0},
		{v: "100%", replicas: 10, want: 10},
		{v: "250%", replicas: 10, want: 10},
		{v: "99999999999999999999", replicas: 10, want: 10}, // overflows int64: more than any Deployment
		{v: "99999999999999999999%", replicas: 10, want: 10},
		{v: "5", replicas: 0, want: 0},
		{v: "5", replicas: -3, want: 0},
		{v: "", replicas: 10, wantErr: true},
		{v: "%", replicas: 10, wantErr: true},
		{v: "-1", replicas: 10, wantErr: true},
		{v: "+1", replicas: 10, wantErr: true},
		{v: " 5", replicas: 10, wantErr: true},
		{v: "5 %", replicas: 10, wantErr: true},
		{v: "2.5", replicas: 10, wantErr: true},
		{v: "5%%", replicas: 10, wantErr: true},
		{v: "five", replicas: 10, wantErr: true},
	} {
		got, err := ParsePartition(tc.v, tc.replicas)
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("ParsePartition(%q, %d) = %d, want an error", tc.v, tc.replicas, got)
		case tc.wantErr && !strings.Contains(err.Error(), RolloutPartitionAnnotation):
			t.Errorf("ParsePartition(%q): error %q does not name the annotation", tc.v, err)
		case !tc.wantErr && (err != nil || got != tc.want):
			t.Errorf("ParsePartition(%q, %d) = %d, %v; want %d", tc.v, tc.replicas, got, err, tc.want)
		}
	}
}

// EX-0: a ReplicaSet's kubedeploy.io/ annotations become exactly the Deployment's current policy annotations;
// bookkeeping and policies the Deployment no longer has are removed, other annotations are left alone.
func TestSetPolicyAnnotations(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		RolloutPartitionAnnotation: "3", ScaleDownSpreadAnnotation: "zone", CompleteRevisionAnnotation: "2", "team": "web"}}}
	for _, tc := range []struct {
		name    string
		rs      map[string]string
		want    map[string]string
		changed bool
	}{
		{"none yet", nil, map[string]string{RolloutPartitionAnnotation: "3", ScaleDownSpreadAnnotation: "zone"}, true},
		{"already the Deployment's", map[string]string{RolloutPartitionAnnotation: "3", ScaleDownSpreadAnnotation: "zone", "x": "y"},
			map[string]string{RolloutPartitionAnnotation: "3", ScaleDownSpreadAnnotation: "zone", "x": "y"}, false},
		{"stale policy and bookkeeping", map[string]string{RolloutPartitionAnnotation: "banana", RollbackOnProgressDeadlineAnnotation: "true",
			FailedRevisionAnnotation: "1", CompleteRevisionAnnotation: "2", "team": "old"},
			map[string]string{RolloutPartitionAnnotation: "3", ScaleDownSpreadAnnotation: "zone", "team": "old"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			differ := PolicyAnnotationsDiffer(d, tc.rs)
			got, changed := SetPolicyAnnotations(d, maps.Clone(tc.rs))
			if !maps.Equal(got, tc.want) || changed != tc.changed || differ != tc.changed {
				t.Errorf("got %v changed %v (differ %v), want %v changed %v", got, changed, differ, tc.want, tc.changed)
			}
		})
	}
	none := &appsv1.Deployment{}
	if got, changed := SetPolicyAnnotations(none, map[string]string{"team": "web"}); changed || len(got) != 1 {
		t.Errorf("a Deployment without policy changed %v: %v", changed, got)
	}
}

// An invalid policy value is named with the annotation, the value and what it wants (issue 33: fail loudly).
func TestPolicyErrors(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			RolloutPartitionAnnotation:           "banana",
			RollbackOnProgressDeadlineAnnotation: "yes",
			PodReplacementPolicyAnnotation:       "Eventually",
			ScaleDownSpreadAnnotation:            "template",
		}},
		Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}},
	}
	var got []string
	for _, err := range PolicyErrors(d) {
		got = append(got, err.Error())
	}
	want := []string{
		`kubedeploy.io/rollout-partition "banana": want a whole number of pods ("5") or a percentage of spec.replicas ("25%")`,
		`kubedeploy.io/rollback-on-progress-deadline "yes": want "true" or "false"`,
		`kubedeploy.io/pod-replacement-policy "Eventually": want "TerminationComplete"`,
		`kubedeploy.io/scale-down-spread "template": want a node label key or "template" (with topologySpreadConstraints)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("PolicyErrors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	d.Annotations = map[string]string{RolloutPartitionAnnotation: "banana", RollbackOnProgressDeadlineAnnotation: "false"}
	if errs := PolicyErrors(d); len(errs) != 0 {
		t.Errorf("Recreate ignores the partition; false is valid: %v", errs)
	}
}
