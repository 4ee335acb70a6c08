package shadow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// testQuiet is the quiet period of the Watchers under test; their clock is fake, so its size costs nothing.
const testQuiet = 10 * time.Second

var web = cache.ObjectName{Namespace: "default", Name: "web"}

// divergentWorld is a settled Deployment kubedeploy would write to (four divergences: its Available
// condition's status and times, and the old ReplicaSet past a revisionHistoryLimit of 0), at resourceVersion rv.
func divergentWorld(rv string) *world {
	w := completeWorld(4, "nginx:1.0", "nginx:1.1")
	w.d.ResourceVersion = rv
	w.d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	w.d.Status.Conditions[0].Status = v1.ConditionFalse
	return w
}

// convergedWorld is divergentWorld's Deployment where kubedeploy would write nothing, at resourceVersion rv.
func convergedWorld(rv string) *world {
	w := completeWorld(4, "nginx:1.0", "nginx:1.1")
	w.d.ResourceVersion = rv
	return w
}

// decision is one call of a Watcher hook, at the fake clock's time.
type decision struct {
	at         time.Time
	state      State      // OnState
	report     *Report    // OnCheck
	divergence Divergence // OnDivergence
	err        error      // OnError
}

// watchTest is a Watcher with a real Checker over informers on a fake clock, recording what its hooks are told.
type watchTest struct {
	t       *testing.T
	ctx     context.Context
	clk     *clocktesting.FakeClock
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	src     Sources
	w       *Watcher

	mu   sync.Mutex
	seen []decision
}

// newWatchTest builds the Watcher over informers of a fake clientset holding wd's objects; the informers are
// not started (tests fill their caches with put) unless a test starts them to call Run.
func newWatchTest(t *testing.T, wd *world) *watchTest {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	wt := &watchTest{t: t, ctx: ctx, clk: clocktesting.NewFakeClock(now), client: fake.NewClientset(wd.objects()...)}
	factory := informers.NewSharedInformerFactory(wt.client, 0)
	wt.factory = factory
	wt.src = Sources{Deployments: factory.Apps().V1().Deployments(), ReplicaSets: factory.Apps().V1().ReplicaSets(), Pods: factory.Core().V1().Pods()}
	c, err := NewChecker(&rest.Config{Host: "http://127.0.0.1:1"}, wt.src, wt.clk)
	if err != nil {
		t.Fatal(err)
	}
	if wt.w, err = NewWatcher(c, wt.src, wt.clk, testQuiet); err != nil {
		t.Fatal(err)
	}
	wt.w.OnState = func(_ cache.ObjectName, s State) { wt.record(decision{state: s}) }
	wt.w.OnCheck = func(r Report) { wt.record(decision{report: &r}) }
	wt.w.OnDivergence = func(_ cache.ObjectName, d Divergence) { wt.record(decision{divergence: d}) }
	wt.w.OnError = func(_ cache.ObjectName, err error) { wt.record(decision{err: err}) }
	return wt
}

func (w *world) objects() []runtime.Object {
	objs := []runtime.Object{w.d}
	for _, rs := range w.rss {
		objs = append(objs, rs)
	}
	for _, p := range w.pods {
		objs = append(objs, p)
	}
	return objs
}

func (wt *watchTest) record(d decision) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	d.at = wt.clk.Now()
	wt.seen = append(wt.seen, d)
}

// decisions returns what the hooks were told so far.
func (wt *watchTest) decisions() []decision {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return append([]decision(nil), wt.seen...)
}

// counts returns how many checks, divergences and errors the hooks were told of, and the last State.
func (wt *watchTest) counts() (checks, divergences, errs int, last State) {
	for _, d := range wt.decisions() {
		switch {
		case d.report != nil:
			checks++
		case d.state != "":
			last = d.state
		case d.err != nil:
			errs++
		default:
			divergences++
		}
	}
	return checks, divergences, errs, last
}

// put writes wd's objects into the informers' caches (as the informers would on events, without the events).
func (wt *watchTest) put(wd *world) {
	wt.t.Helper()
	add := func(inf cache.SharedIndexInformer, obj any) {
		if err := inf.GetIndexer().Update(obj); err != nil {
			wt.t.Fatal(err)
		}
	}
	add(wt.src.Deployments.Informer(), wd.d)
	for _, rs := range wd.rss {
		add(wt.src.ReplicaSets.Informer(), rs)
	}
	for _, p := range wd.pods {
		add(wt.src.Pods.Informer(), p)
	}
}

// sync runs one check of web as the runner would and returns when the Watcher asked to check it again.
func (wt *watchTest) sync() time.Duration {
	wt.t.Helper()
	res, err := wt.w.sync(wt.ctx, web)
	if err != nil {
		wt.t.Fatalf("check of %s: %v", web, err)
	}
	return res.RequeueAfter
}

// expect fails the test unless the hooks were told of checks checks and divergences divergences so far, the
// last State being last, and the Watcher asked for a recheck after recheck.
func (wt *watchTest) expect(step string, gotRecheck time.Duration, checks, divergences int, last State, recheck time.Duration) {
	wt.t.Helper()
	c, d, _, l := wt.counts()
	if c != checks || d != divergences || l != last || gotRecheck != recheck {
		wt.t.Errorf("%s: %d checks, %d divergences reported, state %q, recheck after %v; want %d, %d, %q, %v",
			step, c, d, l, gotRecheck, checks, divergences, last, recheck)
	}
}

// eventually fails the test unless cond holds within 10 s of real time (a bound for a slow machine: the
// informers and the queue deliver on their own goroutines).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A divergent state is reported once it has stayed unchanged for the quiet period, each divergence once: not
// again at the next check, nor when the Deployment changes while still divergent in the same fields.
func TestWatcherReportsADivergenceOnceConfirmed(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	wt.put(divergentWorld("100"))
	wt.expect("first check", wt.sync(), 1, 0, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet / 2)
	wt.expect("half the quiet period later", wt.sync(), 2, 0, StateUnconfirmed, testQuiet/2)
	wt.clk.Step(testQuiet / 2)
	wt.expect("the quiet period later", wt.sync(), 3, 4, StateDivergent, 0)
	wt.expect("checked again", wt.sync(), 4, 4, StateDivergent, 0)

	wt.put(divergentWorld("101"))
	wt.expect("changed, the same divergences", wt.sync(), 5, 4, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet)
	wt.expect("changed, confirmed", wt.sync(), 6, 4, StateDivergent, 0)
}

// A change of the state (its fingerprint) restarts the quiet period.
func TestWatcherRestartsTheQuietPeriodOnChange(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	wt.put(divergentWorld("100"))
	wt.expect("first check", wt.sync(), 1, 0, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet / 2)
	wt.put(divergentWorld("101"))
	wt.expect("changed", wt.sync(), 2, 0, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet / 2)
	wt.expect("the quiet period after the first check", wt.sync(), 3, 0, StateUnconfirmed, testQuiet/2)
	wt.clk.Step(testQuiet / 2)
	wt.expect("the quiet period after the change", wt.sync(), 4, 4, StateDivergent, 0)
}

// Convergence clears what was reported: a later divergence is news again, confirmed after its own quiet period.
func TestWatcherReportsAgainAfterConvergence(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	wt.put(divergentWorld("100"))
	wt.sync()
	wt.clk.Step(testQuiet)
	wt.expect("confirmed", wt.sync(), 2, 4, StateDivergent, 0)

	wt.put(convergedWorld("101"))
	wt.expect("converged", wt.sync(), 3, 4, StateConverged, 0)
	wt.put(divergentWorld("102"))
	wt.expect("divergent again", wt.sync(), 4, 4, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet)
	wt.expect("confirmed again", wt.sync(), 5, 8, StateDivergent, 0)
}

// A deleted Deployment is forgotten: a check that finds it gone decides nothing, and a Deployment of the same
// name created later is confirmed and reported afresh.
func TestWatcherForgetsADeletedDeployment(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	wt.put(divergentWorld("100"))
	wt.sync()
	wt.clk.Step(testQuiet)
	wt.expect("confirmed", wt.sync(), 2, 4, StateDivergent, 0)

	d := divergentWorld("100").d
	if err := wt.src.Deployments.Informer().GetIndexer().Delete(d); err != nil {
		t.Fatal(err)
	}
	wt.expect("checked once gone", wt.sync(), 2, 4, StateDivergent, 0)
	wt.w.deploymentDeleted(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: d})
	wt.expect("deleted", 0, 2, 4, StateForgotten, 0)

	wt.put(divergentWorld("200"))
	wt.expect("created again", wt.sync(), 3, 4, StateUnconfirmed, testQuiet)
	wt.clk.Step(testQuiet)
	wt.expect("confirmed again", wt.sync(), 4, 8, StateDivergent, 0)
}

// A failed check is told to OnError and retried with the runner's backoff; the retry that succeeds is a
// check like any other, whose divergent state the runner rechecks after the quiet period.
func TestWatcherRetriesAFailedCheck(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	wt.put(divergentWorld("100"))
	failures := 1
	check := wt.w.check
	wt.w.check = func(ctx context.Context, key cache.ObjectName) (Report, error) {
		if failures > 0 {
			failures--
			return Report{}, errors.New("the caches cannot be read")
		}
		return check(ctx, key)
	}
	wt.w.runner.Enqueue(web)
	wt.w.runner.ProcessNextItem(wt.ctx)
	if _, _, errs, _ := wt.counts(); errs != 1 || wt.w.runner.NumRequeues(web) != 1 {
		t.Fatalf("after a failed check: %d errors told, %d requeues; want 1 and 1 (a retry with backoff)", errs, wt.w.runner.NumRequeues(web))
	}
	wt.clk.Step(time.Second) // past the first backoff (5ms)
	eventually(t, "the failed check's retry", func() bool { return wt.w.runner.Len() == 1 })
	wt.w.runner.ProcessNextItem(wt.ctx)
	wt.expect("retried", 0, 1, 0, StateUnconfirmed, 0)
	if n := wt.w.runner.NumRequeues(web); n != 0 {
		t.Errorf("after a successful retry: %d requeues, want 0", n)
	}
	wt.clk.Step(testQuiet)
	eventually(t, "the recheck after the quiet period", func() bool { return wt.w.runner.Len() == 1 })
	wt.w.runner.ProcessNextItem(wt.ctx)
	wt.expect("rechecked", 0, 2, 4, StateDivergent, 0)
}

// Run end to end on informers: the informers' events queue the Deployment, the check decides it is unconfirmed,
// its divergences are reported no sooner than the quiet period later, and its deletion forgets it.
func TestWatcherRunReportsFromInformerEvents(t *testing.T) {
	wt := newWatchTest(t, divergentWorld("100"))
	ctx, cancel := context.WithCancel(wt.ctx)
	wt.factory.Start(ctx.Done())
	defer wt.factory.Shutdown()
	done := make(chan struct{})
	go func() { wt.w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The handlers' delays start when the informers deliver the objects, so step until the checks come.
	eventually(t, "the divergences to be reported", func() bool {
		wt.clk.Step(time.Second)
		_, n, _, _ := wt.counts()
		return n == 4
	})
	var first, reported time.Time
	for _, d := range wt.decisions() {
		switch {
		case d.state == StateUnconfirmed && first.IsZero():
			first = d.at
		case d.divergence.Kind != "" && reported.IsZero():
			reported = d.at
		}
	}
	if first.IsZero() || reported.Sub(first) < testQuiet {
		t.Errorf("first found unconfirmed at %v, reported at %v: want reported no sooner than %v later", first, reported, testQuiet)
	}
	if err := wt.client.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted Deployment to be forgotten", func() bool {
		_, _, _, last := wt.counts()
		return last == StateForgotten
	})
}
