package replicaset

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var testNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*v1.Pod)

func onNode(n string) podOpt      { return func(p *v1.Pod) { p.Spec.NodeName = n } }
func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }
func uid(u string) podOpt         { return func(p *v1.Pod) { p.UID = types.UID(u) } }
func created(t time.Time) podOpt  { return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t) } }
func cost(c string) podOpt {
	return func(p *v1.Pod) { p.Annotations = map[string]string{PodDeletionCostAnnotation: c} }
}
func withLabels(l map[string]string) podOpt { return func(p *v1.Pod) { p.Labels = l } }
func readySince(t time.Time) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	}
}
func restarts(n int32) podOpt {
	return func(p *v1.Pod) { p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: n}} }
}
func sidecarRestarts(n int32) podOpt {
	return func(p *v1.Pod) {
		always := v1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always}, {Name: "init"}}
		p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "side", RestartCount: n}, {Name: "init", RestartCount: 100}}
	}
}

func newPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(testNow.Add(-time.Hour))},
		Spec:       v1.PodSpec{NodeName: "node-1"},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// TestRankedPodsLess has one case per RS-14 rule: first is deleted before second.
func TestRankedPodsLess(t *testing.T) {
	ready := readySince(testNow.Add(-time.Hour))
	cases := []struct {
		name          string
		first, second rankedPod
	}{
		{"rule 1 unassigned before assigned", rankedPod{pod: newPod("a", onNode(""), ready)}, rankedPod{pod: newPod("b", phase(v1.PodPending))}},
		{"rule 2 pending before unknown", rankedPod{pod: newPod("a", phase(v1.PodPending), ready)}, rankedPod{pod: newPod("b", phase(v1.PodUnknown))}},
		{"rule 2 unknown before running", rankedPod{pod: newPod("a", phase(v1.PodUnknown), ready)}, rankedPod{pod: newPod("b")}},
		{"rule 2 other phases count as pending", rankedPod{pod: newPod("a", phase("Weird"), ready)}, rankedPod{pod: newPod("b", phase(v1.PodUnknown))}},
		{"rule 3 not ready before ready", rankedPod{pod: newPod("a"), cost: 5}, rankedPod{pod: newPod("b", ready)}},
		{"rule 4 lower deletion cost first", rankedPod{pod: newPod("a", ready), cost: -1, rank: 1}, rankedPod{pod: newPod("b", ready), rank: 9}},
		{"rule 5 higher rank first", rankedPod{pod: newPod("a", readySince(testNow.Add(-100*time.Hour))), rank: 3}, rankedPod{pod: newPod("b", ready), rank: 2}},
		{"rule 6 more recently ready first", rankedPod{pod: newPod("a", readySince(testNow.Add(-time.Minute)), restarts(0))}, rankedPod{pod: newPod("b", ready, restarts(9))}},
		{"rule 6 zero ready time is most recent", rankedPod{pod: newPod("z", readySince(time.Time{}))}, rankedPod{pod: newPod("a", readySince(testNow.Add(-time.Second)))}},
		{
			// 40m and 50m ago share the floor(log2(ns)) bucket 41, so the smaller UID goes first
			// even though it became ready earlier.
			"rule 6 same log2 bucket falls back to smaller UID",
			rankedPod{pod: newPod("a", uid("aaa"), readySince(testNow.Add(-50*time.Minute)))},
			rankedPod{pod: newPod("b", uid("bbb"), readySince(testNow.Add(-40*time.Minute)))},
		},
		{"rule 7 more restarts first", rankedPod{pod: newPod("a", restarts(3))}, rankedPod{pod: newPod("b", restarts(1), created(testNow.Add(-time.Second)))}},
		{"rule 7 sidecar restarts break a tie", rankedPod{pod: newPod("a", restarts(1), sidecarRestarts(2))}, rankedPod{pod: newPod("b", restarts(1), sidecarRestarts(1), created(testNow.Add(-time.Second)))}},
		{"rule 8 newer first", rankedPod{pod: newPod("a", created(testNow.Add(-time.Second)))}, rankedPod{pod: newPod("b", created(testNow.Add(-time.Hour)))}},
		{"rule 8 zero creation time first", rankedPod{pod: newPod("z", created(time.Time{}))}, rankedPod{pod: newPod("a", created(testNow))}},
		{
			"rule 8 same log2 bucket falls back to smaller UID",
			rankedPod{pod: newPod("a", uid("aaa"), created(testNow.Add(-50*time.Minute)))},
			rankedPod{pod: newPod("b", uid("bbb"), created(testNow.Add(-40*time.Minute)))},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !rankedPodsLess(tc.first, tc.second, testNow) {
				t.Errorf("expected %s to be deleted before %s", tc.first.pod.Name, tc.second.pod.Name)
			}
			if rankedPodsLess(tc.second, tc.first, testNow) {
				t.Errorf("ordering is not antisymmetric for %s and %s", tc.first.pod.Name, tc.second.pod.Name)
			}
		})
	}
	t.Run("rule 9 equal pods", func(t *testing.T) {
		a, b := rankedPod{pod: newPod("a", uid("x"))}, rankedPod{pod: newPod("b", uid("x"))}
		if rankedPodsLess(a, b, testNow) || rankedPodsLess(b, a, testNow) {
			t.Error("identical pods must compare equal")
		}
	})
}

func TestLogBucket(t *testing.T) {
	if b40, b50 := logBucket(40*time.Minute), logBucket(50*time.Minute); b40 != b50 || b40 != 41 {
		t.Errorf("logBucket(40m)=%d, logBucket(50m)=%d; want both 41", b40, b50)
	}
	if logBucket(time.Minute) >= logBucket(time.Hour) {
		t.Error("a younger age must fall in a lower bucket")
	}
	if logBucket(0) != 0 || logBucket(-time.Second) != 0 {
		t.Error("non-positive ages are bucket 0")
	}
}

// TestParseDeletionCost covers OM-9.
func TestParseDeletionCost(t *testing.T) {
	cases := map[string]int32{
		"": 0, "0": 0, "5": 5, "-5": -5, "+5": 0, "007": 0, "-007": 0, "1.5": 0, "abc": 0, " 5": 0,
		"2147483647": 2147483647, "-2147483648": -2147483648, "2147483648": 0, "-": 0,
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			if got := parseDeletionCost(in); got != want {
				t.Errorf("parseDeletionCost(%q) = %d, want %d", in, got, want)
			}
		})
	}
}

// TestPodsToDelete covers RS-14 victim selection including the node rank.
func TestPodsToDelete(t *testing.T) {
	// a and b share node-1 with two more related pods; c is alone on node-2.
	a, b, c := newPod("a", uid("1")), newPod("b", uid("2")), newPod("c", uid("3"), onNode("node-2"))
	other1, other2 := newPod("o1"), newPod("o2")
	terminatingOther := newPod("o3", onNode("node-2"))
	terminatingOther.DeletionTimestamp = &metav1.Time{Time: testNow}
	related := []*v1.Pod{a, b, c, other1, other2, terminatingOther}
	cases := []struct {
		name    string
		pods    []*v1.Pod
		related []*v1.Pod
		diff    int
		want    []string
	}{
		{"diff >= pods takes all", []*v1.Pod{a, b}, related, 5, []string{"a", "b"}},
		{"rank: crowded node first", []*v1.Pod{c, a}, related, 1, []string{"a"}},
		{"no related pods: rank ties, newer first", []*v1.Pod{newPod("old", created(testNow.Add(-10*time.Hour))), newPod("new", created(testNow.Add(-time.Minute)))}, nil, 1, []string{"new"}},
		{"cost beats rank", []*v1.Pod{c, newPod("a2", cost("5"))}, related, 1, []string{"c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podsToDelete(tc.pods, tc.related, tc.diff, testNow, nil)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d victims, want %v", len(got), tc.want)
			}
			for i := range got {
				if got[i].Name != tc.want[i] {
					t.Errorf("victim %d = %s, want %s", i, got[i].Name, tc.want[i])
				}
			}
		})
	}
	if r := ranksOnSameNode([]*v1.Pod{a, c}, related); r[0] != 4 || r[1] != 1 {
		t.Errorf("ranks = %v, want [4 1] (terminating related pods do not count)", r)
	}
}
