package rolloutmetrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
)

// TestAttached: sources come back in the order they were attached; a detach removes only the source its Add
// attached (one of two attachments of the same source), and a second call of it removes nothing more.
func TestAttached(t *testing.T) {
	var a Attached[string]
	x, y := ptrTo("x"), ptrTo("y")
	detachX := a.Add(x)
	detachY := a.Add(y)
	detachX2 := a.Add(x)
	if got := a.All(); !slices.Equal(got, []*string{x, y, x}) {
		t.Fatalf("All() = %v, want x, y, x", got)
	}
	detachX()
	detachX()
	if got := a.All(); !slices.Equal(got, []*string{y, x}) {
		t.Errorf("after detaching x's first attachment twice: All() = %v, want y, x", got)
	}
	detachY()
	detachX2()
	if got := a.All(); len(got) != 0 {
		t.Errorf("after detaching all: All() = %v, want none", got)
	}
}

// TestUnavailablePodsSeveralSets: with two controller sets' caches over disjoint namespaces in use, one scrape
// has both sets' series; stopping one set's removes its series only, and stopping it again changes nothing. A
// series that two sets both report is sent once, from the set attached first.
func TestUnavailablePodsSeveralSets(t *testing.T) {
	a, b := newUnavailableFixture(t), newUnavailableFixture(t)
	a.pod(a.replicaSet("team-a", "web-7c5d", deploymentRef("web"), 0), "web-1", imagePullBackOff)
	api := b.replicaSet("team-b", "api-9f8e", deploymentRef("api"), 0)
	b.pod(api, "api-1", notReady)
	b.pod(api, "api-2", notReady)
	stopB := a.collector.use(b.caches)
	webA := `kubedeploy_deployment_unavailable_pods{deployment="web",namespace="team-a",reason="ImagePullBackOff"} 1`
	apiB := `kubedeploy_deployment_unavailable_pods{deployment="api",namespace="team-b",reason="NotReady"} 2`
	a.check(apiB, webA)

	overlap := newUnavailableFixture(t) // a third set that, wrongly, also has team-a's web
	rs := overlap.replicaSet("team-a", "web-7c5d", deploymentRef("web"), 0)
	overlap.pod(rs, "web-1", imagePullBackOff)
	overlap.pod(rs, "web-2", imagePullBackOff)
	stopOverlap := a.collector.use(overlap.caches)
	a.check(apiB, webA)
	stopOverlap()

	a.stop()
	a.check(apiB)
	a.stop()
	a.check(apiB)
	stopB()
	stopB()
	a.check()
}

// TestInProgressSeveralTrackers: with the trackers of two controller sets over disjoint namespaces in Use, one
// scrape of /metrics has both sets' rollouts in progress; stopping one set's tracker removes its series only,
// and stopping it again changes nothing. A Deployment that two trackers both have in progress is sent once, from
// the tracker in Use first.
func TestInProgressSeveralTrackers(t *testing.T) {
	Register()
	collector.now = func() time.Time { return at(20) }
	defer func() { collector.now = time.Now }()
	trackerA, trackerB := NewTracker(), NewTracker()
	stopA := Use(trackerA, klog.Background())
	defer stopA()
	stopB := Use(trackerB, klog.Background())
	defer stopB()
	observeRolloutIn(trackerA, "team-a", at(0))
	observeRolloutIn(trackerB, "team-b", at(5))

	age := func(series ...string) string {
		if len(series) == 0 {
			return ""
		}
		return "# HELP kubedeploy_deployment_rollout_age_seconds [ALPHA] Seconds since the rollout in progress of a Deployment " +
			"started (its new ReplicaSet became the new one).\n# TYPE kubedeploy_deployment_rollout_age_seconds gauge\n" +
			strings.Join(series, "\n") + "\n"
	}
	ageA := `kubedeploy_deployment_rollout_age_seconds{deployment="web",namespace="team-a"} 20`
	ageB := `kubedeploy_deployment_rollout_age_seconds{deployment="web",namespace="team-b"} 15`
	overlap := NewTracker() // a third set that, wrongly, also has team-a's web
	observeRolloutIn(overlap, "team-a", at(10))
	var stopOverlap func()
	for _, step := range []struct {
		name string
		stop func()
		want string
	}{
		{"both in use", func() {}, age(ageA, ageB)},
		{"a third over team-a too", func() { stopOverlap = Use(overlap, klog.Background()) }, age(ageA, ageB)},
		{"the third stopped", func() { stopOverlap() }, age(ageA, ageB)},
		{"team-a's stopped", stopA, age(ageB)},
		{"team-a's stopped again", stopA, age(ageB)},
		{"both stopped", stopB, age()},
	} {
		step.stop()
		if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(step.want),
			"kubedeploy_deployment_rollout_age_seconds"); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
}

// observeRolloutIn has tr observe, at start, Deployment web in namespace starting a rollout to a new ReplicaSet
// whose one pod waits on its image.
func observeRolloutIn(tr *Tracker, namespace string, start time.Time) {
	c := newCluster("nginx:2")
	c.rs("nginx:1", "1", start.Add(-100*time.Second))
	rs2 := c.rs("nginx:2", "2", start)
	c.progressing("ReplicaSetUpdated")
	c.pod(rs2, "web-2-a", "ImagePullBackOff")
	c.d.Namespace = namespace
	for _, rs := range c.rss {
		rs.Namespace = namespace
	}
	for _, p := range c.pods {
		p.Namespace = namespace
	}
	tr.Observe(c.d, c.rss, c.pods, start)
}
