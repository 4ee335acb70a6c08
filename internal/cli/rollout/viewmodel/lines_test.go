package viewmodel

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// LinesWithoutAges, what `rollout watch` compares to decide on a new
// block, differs when anything Lines(true) shows changes, a why-message
// included, and not when only the ages in why-messages tick.
func TestLinesWithoutAges(t *testing.T) {
	d := deployment("nginx:2", appsv1.DeploymentStatus{Replicas: 5, UpdatedReplicas: 2, AvailableReplicas: 3}, progressing)
	d.Spec.MinReadySeconds = 30
	newRS := replicaSet(d, "web-new", "2", "nginx:2", 3, 0)
	minReady := pod(newRS, "web-new-c", "", "")
	minReady.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-5 * time.Second))
	pods := []*v1.Pod{
		pod(newRS, "web-new-a", unavailable.NotReady, ""),
		pod(newRS, "web-new-b", "ImagePullBackOff", `Back-off pulling image "nginx:2"`),
		minReady,
	}
	in := Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{newRS}, Pods: pods}
	base := Build(in, now)
	if got := base.Lines(true); !strings.Contains(got, "not Ready after 12s") || !strings.Contains(got, "Ready for 5s of minReadySeconds 30s") {
		t.Fatalf("Lines(true) lacks the ages:\n%s", got)
	}
	if got := base.LinesWithoutAges(); strings.Contains(got, "12s") || strings.Contains(got, "5s of") || !strings.Contains(got, "minReadySeconds …") {
		t.Errorf("LinesWithoutAges shows ages:\n%s", got)
	}

	later := Build(in, now.Add(7*time.Second))
	if later.Lines(true) == base.Lines(true) {
		t.Fatalf("the ages did not tick")
	}
	if later.LinesWithoutAges() != base.LinesWithoutAges() {
		t.Errorf("only ages ticked but LinesWithoutAges changed:\n%s\nto\n%s", base.LinesWithoutAges(), later.LinesWithoutAges())
	}

	changed := pods[1].DeepCopy()
	changed.Status.ContainerStatuses[0].State.Waiting.Message = `rpc error: manifest for nginx:2 not found`
	in.Pods = []*v1.Pod{pods[0], changed, pods[2]}
	if got := Build(in, now).LinesWithoutAges(); got == base.LinesWithoutAges() {
		t.Errorf("a why-message changed but LinesWithoutAges did not:\n%s", got)
	}
}

// withoutAges replaces the durations of a message, and nothing else.
func TestWithoutAges(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"not Ready after 1m5s: containers with unready status: [web]", "not Ready after …: containers with unready status: [web]"},
		{"Ready for 0s of minReadySeconds 10s", "Ready for … of minReadySeconds …"},
		{`container web: Back-off pulling image "nginx:1.9.3s"`, `container web: Back-off pulling image "nginx:1.9.3s"`},
		{"container web-5m: exit code 1 ", "container web-5m: exit code 1 "},
		{"1h2m3.5s", "…"},
	} {
		if got := withoutAges(tc.in); got != tc.want {
			t.Errorf("withoutAges(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
