package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// The sharded replicas' settings: leases of 5s/3s/1s in their own namespace, rings of 8 buckets.
const (
	shardNamespace     = "kubedeploy-shards-e2e"
	shardLeaseDuration = 5 * time.Second
	shardBuckets       = 8
	// shardReplicasPerDeployment is each Deployment's size: maxSurge 25% = 2 and maxUnavailable 25% = 1, so
	// its ReplicaSets total at most 8 replicas and keep at least 5 available.
	shardReplicasPerDeployment = 6
	shardMaxTotal              = 8
	shardMinAvailable          = 5
	// shardPause is how long scenario (b) stops a replica: longer than the lease duration.
	shardPause = 8 * time.Second
)

// shardOptions size a never-two-owners run, from the environment: KUBEDEPLOY_SHARD_NAMESPACES (default 16),
// KUBEDEPLOY_SHARD_KILLS (3) and KUBEDEPLOY_SHARD_KILL_EVERY (10s); KUBEDEPLOY_SHARD_LONG=1 makes the
// defaults the 10 kills every 20 s (about 4 minutes a variant).
type shardOptions struct {
	namespaces int
	kills      int
	killEvery  time.Duration
	long       bool
	// auditLists makes the audit log hold every LIST of pods, ReplicaSets and Deployments too.
	auditLists bool
}

func shardOptionsFromEnv(t *testing.T) shardOptions {
	t.Helper()
	o := shardOptions{namespaces: 16, kills: 3, killEvery: 10 * time.Second, long: os.Getenv("KUBEDEPLOY_SHARD_LONG") == "1"}
	if o.long {
		o.kills, o.killEvery = 10, 20*time.Second
	}
	for name, n := range map[string]*int{"KUBEDEPLOY_SHARD_NAMESPACES": &o.namespaces, "KUBEDEPLOY_SHARD_KILLS": &o.kills} {
		if s := os.Getenv(name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, s)
			}
			*n = v
		}
	}
	if s := os.Getenv("KUBEDEPLOY_SHARD_KILL_EVERY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("KUBEDEPLOY_SHARD_KILL_EVERY=%q: want a positive duration", s)
		}
		o.killEvery = d
	}
	return o
}

// TestShardedNeverTwoOwners is issue 35's "never two owners" run with ShardedListAndWatch on (SH-1, SH-2,
// SH-3, SH-5, SH-7): during rollouts of every Deployment, (a) kill -9 of one replica every K seconds, M times,
// a new one started after each, (b) SIGSTOP of one replica for longer than the lease duration, then SIGCONT,
// (c) 1 → 3 → 2 → 4 replicas (SIGTERM going down). From the API server's audit log: every workload write of
// a replica fell while the ring gave it the namespace's bucket; the woken replica wrote nothing before it
// claimed again; each killed replica's buckets were given to another within lease duration + 5 s (p99).
// An independent watch of every Deployment's ReplicaSets sees no surge or availability bound broken, one of
// its pods never more live and terminating pods than replicas + maxSurge (EX-3, every Deployment opted in),
// and every rollout completes. Each replica says the API server filters by shard (SH-4).
func TestShardedNeverTwoOwners(t *testing.T) {
	skipShort(t)
	runNeverTwoOwners(t, shardOptionsFromEnv(t), nil, "the API server filters lists and watches by shard")
}

// TestShardedNeverTwoOwnersFallback is TestShardedNeverTwoOwners with ShardedListAndWatch off on the API
// server (issue 35, "Fallback"; SH-4): the same three fault runs pass and each replica says it filters
// client-side only. About 80 s; KUBEDEPLOY_SHARD_FALLBACK=0 skips it.
func TestShardedNeverTwoOwnersFallback(t *testing.T) {
	skipShort(t)
	if os.Getenv("KUBEDEPLOY_SHARD_FALLBACK") == "0" {
		t.Skip("KUBEDEPLOY_SHARD_FALLBACK=0")
	}
	runNeverTwoOwners(t, shardOptionsFromEnv(t), []string{"--feature-gates=ShardedListAndWatch=false"}, "filters client-side only")
}

// runNeverTwoOwners runs the three scenarios with upArgs added to `up`'s, then checks the audit log and that
// every replica logged filtering.
func runNeverTwoOwners(t *testing.T, o shardOptions, upArgs []string, filtering string) {
	started := time.Now()
	r := startShardRun(t, o, upArgs)
	for range 3 {
		r.startReplica()
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	r.watchRollouts()
	stopRollouts := r.keepRollingOut()
	r.killScenario(o.kills, o.killEvery)
	r.pauseScenario()
	r.scaleScenario()
	stopRollouts()
	r.waitRolloutsComplete()
	r.checkRollouts()
	t.Logf("scenarios done in %s", time.Since(started).Round(time.Second))
	r.checkAudit()
	for _, p := range r.all {
		if !bytes.Contains(p.out.Bytes(), []byte(filtering)) {
			t.Errorf("replica %s never logged %q", p.identity, filtering)
		}
	}
}

// shardRun is one never-two-owners run: `up --controllers=` writing an audit log, a Deployment in each
// namespace, the sharded replicas started so far and what was done to them.
type shardRun struct {
	t          *testing.T
	ctx        context.Context
	dir        string
	client     kubernetes.Interface
	namespaces []string
	watches    []*harness.RolloutWatch
	podWatches []*harness.PodWatch
	live       []*shardReplica // running, oldest first
	all        []*shardReplica // every one started
	kills      []shardEvent    // (a)
	pauses     []shardEvent    // (b): at is SIGSTOP, woke SIGCONT
}

// shardReplica is a running `kubedeploy controllers --sharding` and the identity it logged.
type shardReplica struct {
	*controllersProcess
	identity string
}

// shardEvent is a fault done to a replica.
type shardEvent struct {
	identity string
	at, woke time.Time
}

// startShardRun starts `up --controllers=` with an audit policy (auditPolicy, or listsAuditPolicy when
// o.auditLists) and log in a new data dir, and creates the replicas' namespace and o.namespaces namespaces
// ns-01… each with Deployment "web", before any replica runs.
func startShardRun(t *testing.T, o shardOptions, upArgs []string) *shardRun {
	t.Helper()
	dir := t.TempDir()
	policy, rules := filepath.Join(dir, "audit-policy.yaml"), auditPolicy(shardNamespace)
	if o.auditLists {
		rules = listsAuditPolicy(shardNamespace)
	}
	if err := os.WriteFile(policy, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "1s",
		"--audit-policy-file", policy, "--audit-log-path", filepath.Join(dir, "audit.log")}, upArgs...)
	startUp(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	r := &shardRun{t: t, ctx: ctx, dir: dir, client: clientFor(t, dir)}
	r.createNamespace(shardNamespace)
	for i := 1; i <= o.namespaces; i++ {
		ns := fmt.Sprintf("ns-%02d", i)
		r.createNamespace(ns)
		d := harness.NewDeployment(ns, "web", shardReplicasPerDeployment, "nginx:1.9")
		// EX-3, so that "no namespace with more live pods than its Deployment allows" is a bound to check.
		d.Annotations = map[string]string{rolloutstate.PodReplacementPolicyAnnotation: rolloutstate.PodReplacementTerminationComplete}
		if _, err := r.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.namespaces = append(r.namespaces, ns)
	}
	return r
}

func (r *shardRun) createNamespace(name string) {
	r.t.Helper()
	if _, err := r.client.CoreV1().Namespaces().Create(r.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// identityLine finds the identity a replica logs at start.
var identityLine = regexp.MustCompile(`identity"?[=:]"([^"]+)"`)

// startReplica starts one sharded replica, with extra arguments after the usual ones, and waits for it to log
// its identity.
func (r *shardRun) startReplica(extra ...string) *shardReplica {
	r.t.Helper()
	p := startControllersWith(r.t, append([]string{"--sharding", "--kubeconfig", filepath.Join(r.dir, "kubeconfig"), "--secure-port", "0",
		"--leader-elect-resource-namespace=" + shardNamespace, "--leader-elect-lease-duration=5s",
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s", fmt.Sprintf("--shard-buckets=%d", shardBuckets)}, extra...)...)
	rep := &shardReplica{controllersProcess: p}
	harness.Eventually(r.t, 30*time.Second, "a sharded replica to log its identity", func(context.Context) (bool, error) {
		if m := identityLine.FindSubmatch(p.out.Bytes()); m != nil {
			rep.identity = string(m[1])
			return true, nil
		}
		return false, nil
	})
	r.live = append(r.live, rep)
	r.all = append(r.all, rep)
	return rep
}

// ring reads and decodes the ring from the API server.
func (r *shardRun) ring(ctx context.Context) (shard.Ring, error) {
	cm, err := r.client.CoreV1().ConfigMaps(shardNamespace).Get(ctx, shard.DefaultRingName, metav1.GetOptions{})
	if err != nil {
		return shard.Ring{}, err
	}
	return shard.DecodeRing(cm)
}

// waitSettled waits up to two minutes for the ring to give every bucket to a live replica, every live replica
// at least one bucket, and to have no release under way (SH-5).
func (r *shardRun) waitSettled(what string) {
	r.t.Helper()
	start := time.Now()
	harness.Eventually(r.t, 2*time.Minute, "the ring to settle "+what, func(ctx context.Context) (bool, error) {
		ring, err := r.ring(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // not made yet
		}
		owned := map[string]int{}
		for _, b := range ring.Buckets {
			if b.ReleasingTo != "" || !slices.ContainsFunc(r.live, func(p *shardReplica) bool { return p.identity == b.Owner }) {
				return false, nil
			}
			owned[b.Owner]++
		}
		return len(owned) == len(r.live), nil
	})
	r.t.Logf("ring settled %s in %s (%d replicas)", what, time.Since(start).Round(100*time.Millisecond), len(r.live))
}

// watchRollouts starts, for every Deployment (complete by now), a watch of its ReplicaSets' surge and
// availability bounds and one of its namespace's pods.
func (r *shardRun) watchRollouts() {
	r.t.Helper()
	for _, ns := range r.namespaces {
		r.watches = append(r.watches, harness.WatchRollout(r.t, r.client, ns, "web",
			harness.Bounds{MaxTotal: shardMaxTotal, MinAvailable: shardMinAvailable}))
		r.podWatches = append(r.podWatches, harness.WatchPods(r.t, r.client, ns, labels.Everything()))
	}
}

// keepRollingOut changes the image of every Deployment every 3 seconds, so that rollouts are under way
// throughout, until the returned stop is called.
func (r *shardRun) keepRollingOut() (stop func()) {
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := 1; ; round++ {
			for _, ns := range r.namespaces {
				patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.9-r%d"}]}}}}`, round)
				_, err := r.client.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
				if err != nil && ctx.Err() == nil {
					r.t.Errorf("setting the image of %s/web: %v", ns, err)
				}
			}
			select {
			case <-ctx.Done():
				r.t.Logf("changed the image of every Deployment %d times", round)
				return
			case <-time.After(3 * time.Second):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// waitRolloutsComplete waits for every Deployment to complete.
func (r *shardRun) waitRolloutsComplete() {
	r.t.Helper()
	start := time.Now()
	for _, ns := range r.namespaces {
		harness.WaitComplete(r.t, r.client, ns, "web", 3*time.Minute)
	}
	r.t.Logf("every rollout complete after %s", time.Since(start).Round(100*time.Millisecond))
}

// checkRollouts stops the watches and fails the test if a bound was broken at any event: a ReplicaSet total
// past replicas + maxSurge, availability under replicas - maxUnavailable, or a namespace holding more live and
// terminating pods than replicas + maxSurge (every Deployment is opted into TerminationComplete, EX-3).
func (r *shardRun) checkRollouts() {
	r.t.Helper()
	for _, w := range r.watches {
		w.Stop()
		w.Check(1)
	}
	most := 0
	for _, w := range r.podWatches {
		w.Stop()
		_, _, maxPresent, changes := w.Window()
		most = max(most, maxPresent)
		if maxPresent > shardMaxTotal || changes == 0 {
			r.t.Errorf("%s: %d pods present at most (want ≤ %d, TerminationComplete), %d changes seen", w.Namespace(), maxPresent, shardMaxTotal, changes)
		}
	}
	r.t.Logf("at most %d pods present in a namespace (bound %d)", most, shardMaxTotal)
}

// killScenario is (a): every every, kill -9 of the replica owning the most buckets, a new replica started at
// once; kills times. It then waits for the ring to settle.
func (r *shardRun) killScenario(kills int, every time.Duration) {
	r.t.Helper()
	for i := range kills {
		time.Sleep(every)
		victim := r.busiest()
		r.signal(victim, syscall.SIGKILL)
		r.kills = append(r.kills, shardEvent{identity: victim.identity, at: time.Now()})
		victim.exited <- <-victim.exited // keep the exit for the cleanup
		r.remove(victim)
		r.startReplica()
		r.t.Logf("(a) kill %d/%d: kill -9 of %s, a new replica started", i+1, kills, victim.identity)
	}
	r.waitSettled("after the kills")
}

// pauseScenario is (b): SIGSTOP of the replica owning the most buckets for shardPause (longer than the lease
// duration), then SIGCONT; it then waits for the ring to settle with that replica in it again.
func (r *shardRun) pauseScenario() {
	r.t.Helper()
	victim := r.busiest()
	r.signal(victim, syscall.SIGSTOP)
	stopped := time.Now()
	time.Sleep(shardPause)
	r.signal(victim, syscall.SIGCONT)
	r.pauses = append(r.pauses, shardEvent{identity: victim.identity, at: stopped, woke: time.Now()})
	r.t.Logf("(b) SIGSTOP of %s for %s, then SIGCONT", victim.identity, shardPause)
	// The woken replica stays to the end of (c), so that what it writes after waking is in the log.
	r.remove(victim)
	r.live = append(r.live, victim)
	r.waitSettled("after the pause")
}

// scaleScenario is (c): 3 → 1 → 3 → 2 → 4 replicas, SIGTERM (a graceful exit) going down, the ring settled
// after each step.
func (r *shardRun) scaleScenario() {
	r.t.Helper()
	for _, want := range []int{1, 3, 2, 4} {
		for len(r.live) > want {
			r.terminate(r.live[0])
		}
		for len(r.live) < want {
			r.startReplica()
		}
		r.waitSettled(fmt.Sprintf("at %d replicas", want))
	}
}

// busiest returns the live replica the ring gives the most buckets.
func (r *shardRun) busiest() *shardReplica {
	r.t.Helper()
	ring, err := r.ring(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	best, most := r.live[0], -1
	for _, p := range r.live {
		n := 0
		for _, b := range ring.Buckets {
			if b.Owner == p.identity {
				n++
			}
		}
		if n > most {
			best, most = p, n
		}
	}
	return best
}

func (r *shardRun) signal(p *shardReplica, sig syscall.Signal) {
	r.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("%v to %s: %v", sig, p.identity, err)
	}
}

// terminate sends SIGTERM to p and waits up to a minute for it to exit 0.
func (r *shardRun) terminate(p *shardReplica) {
	r.t.Helper()
	r.signal(p, syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			r.t.Errorf("replica %s exited with %v after SIGTERM, want 0", p.identity, err)
		}
	case <-time.After(time.Minute):
		r.t.Fatalf("replica %s did not exit within a minute of SIGTERM", p.identity)
	}
	r.remove(p)
	r.t.Logf("(c) SIGTERM of %s", p.identity)
}

func (r *shardRun) remove(p *shardReplica) {
	r.live = slices.DeleteFunc(r.live, func(q *shardReplica) bool { return q == p })
}

// checkAudit checks the run from the API server's audit log: SH-1 for every workload write of a replica, SH-2
// for every woken replica, and the unowned time after each kill (issue 35: p99 ≤ lease duration + 5 s).
func (r *shardRun) checkAudit() {
	r.t.Helper()
	events, history := r.auditHistory()
	violations, checked := ownershipViolations(events, history)
	r.t.Logf("audit log: %d events, %d ring versions, %d workload writes by %d replicas checked against the ring",
		len(events), len(history), checked, len(r.all))
	if checked == 0 || len(history) < 2 {
		r.t.Errorf("the audit log holds %d replica writes and %d ring versions: it proves nothing", checked, len(history))
	}
	for i, v := range violations {
		if i == 20 {
			r.t.Errorf("... and %d more writes outside the writer's ownership", len(violations)-20)
			break
		}
		r.t.Errorf("SH-1: two owners: %s", v)
	}
	r.checkUnowned(history)
	for _, p := range r.pauses {
		r.checkWoken(events, history, p)
	}
}

// checkUnowned reports how long each killed replica's buckets went unowned and fails the test if the p99 over
// the kills is past lease duration + 5 s.
func (r *shardRun) checkUnowned(history []ringVersion) {
	r.t.Helper()
	var worst []time.Duration
	for i, k := range r.kills {
		d, buckets, ok := unownedAfter(history, k.identity, k.at)
		if !ok {
			r.t.Errorf("kill %d: a bucket of %s was never given to another replica", i+1, k.identity)
			continue
		}
		if buckets == 0 {
			r.t.Errorf("kill %d: the ring gave %s no bucket when it was killed: the kill proves nothing", i+1, k.identity)
			continue
		}
		r.t.Logf("kill %d: %d buckets of %s unowned for up to %.2fs (kill -9 → the ring write giving the last to another replica)",
			i+1, buckets, k.identity, d.Seconds())
		worst = append(worst, d)
	}
	if len(worst) > 0 {
		got, limit := p99(worst), shardLeaseDuration+5*time.Second
		r.t.Logf("unowned after a kill: p99 %.2fs over %d kills (limit %s)", got.Seconds(), len(worst), limit)
		if got > limit {
			r.t.Errorf("buckets went unowned for %.2fs after a kill (p99), more than lease duration + 5s = %s", got.Seconds(), limit)
		}
	}
}

// checkWoken checks SH-2 for the replica paused at p: the ring gave at least one of its buckets to another
// replica while it was stopped (else the pause tested nothing), and after waking it wrote no Deployment,
// ReplicaSet or Pod before it had claimed a bucket again.
func (r *shardRun) checkWoken(events []auditEvent, history []ringVersion, p shardEvent) {
	r.t.Helper()
	before, after := ownedAt(history, p.at, p.identity), ownedAt(history, p.woke, p.identity)
	moved := slices.DeleteFunc(slices.Clone(before), func(i int) bool { return slices.Contains(after, i) })
	r.t.Logf("(b) %s owned buckets %v when stopped, %v when woken", p.identity, before, after)
	if len(moved) == 0 {
		r.t.Errorf("(b) none of %s's buckets %v was taken while it was stopped for %s", p.identity, before, shardPause)
	}
	early, writes := writesBeforeClaim(events, history, p.identity, p.woke)
	r.t.Logf("(b) %s made %d workload writes after waking, %d before claiming again", p.identity, writes, len(early))
	if writes == 0 {
		r.t.Errorf("(b) %s wrote nothing after waking: the check proves nothing", p.identity)
	}
	for _, e := range early {
		r.t.Errorf("SH-2: %s wrote after waking before it claimed again: %s", p.identity, e)
	}
}

// auditHistory reads the run's audit log: every event, and the ring's versions in it. A file that cannot be
// read or parsed fails the test.
func (r *shardRun) auditHistory() ([]auditEvent, []ringVersion) {
	r.t.Helper()
	events, err := readAuditFile(filepath.Join(r.dir, "audit.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	history, err := ringHistory(events, shardNamespace, shard.DefaultRingName)
	if err != nil {
		r.t.Fatal(err)
	}
	return events, history
}
