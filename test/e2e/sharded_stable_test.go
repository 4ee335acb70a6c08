package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestShardedBucketsStayPut is issue 45's "buckets that stay put" (SH-8) on `up --controllers=`: 24 namespaces
// with one Deployment each (2 to 8 replicas, maxSurge 2), created before any replica starts; once the ring has
// settled (every bucket owned, the plan has no move left) and every Deployment is complete, rounds of rollouts
// of every Deployment, one after the other, with no replica coming or going: a watch of the ring's ConfigMap
// sees no owner change and no re-split. Three replicas and three rounds, then two and five.
func TestShardedBucketsStayPut(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct{ replicas, rounds int }{{3, 3}, {2, 5}} {
		t.Run(fmt.Sprintf("%d replicas %d rounds", tc.replicas, tc.rounds), func(t *testing.T) {
			r := startStableRun(t, 24)
			for range tc.replicas {
				r.startReplica()
			}
			r.waitPlanSettled()
			r.waitRolloutsComplete()
			stop := r.watchRingChanges()
			for round := 1; round <= tc.rounds; round++ {
				start := time.Now()
				for _, ns := range r.namespaces {
					harness.SetImage(r.ctx, t, r.client, ns, "web", "web", fmt.Sprintf("nginx:1.9-r%d", round))
				}
				for _, ns := range r.namespaces {
					harness.WaitComplete(t, r.client, ns, "web", 3*time.Minute)
				}
				t.Logf("round %d: every rollout complete in %s", round, time.Since(start).Round(100*time.Millisecond))
			}
			changes, versions := stop()
			ring, err := r.ring(r.ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d ring versions seen during the rollouts; moves since the ring was made: %v", versions, ring.Moves)
			for _, c := range changes {
				t.Errorf("during the rollouts, with no replica coming or going: %s", c)
			}
		})
	}
}

// startStableRun starts `up --controllers=` in a new data dir and creates the replicas' namespace and n
// namespaces team-01… each with Deployment "web" of 2 to 8 replicas, maxSurge 2, before any replica runs.
func startStableRun(t *testing.T, n int) *shardRun {
	t.Helper()
	dir := t.TempDir()
	startUp(t, "--data-dir", dir, "--api-port", "0", "--controllers=", "--pod-startup-delay", "500ms")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	r := &shardRun{t: t, ctx: ctx, dir: dir, client: clientFor(t, dir)}
	r.createNamespace(shardNamespace)
	for i := range n {
		ns := fmt.Sprintf("team-%02d", i+1)
		r.createNamespace(ns)
		d := harness.NewDeployment(ns, "web", int32(2+i*5%7), "nginx:1.9")
		surge := intstr.FromInt32(2)
		d.Spec.Strategy.RollingUpdate.MaxSurge = &surge
		if _, err := r.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.namespaces = append(r.namespaces, ns)
	}
	return r
}

// waitPlanSettled waits up to two minutes for the ring to give every bucket to a live replica, each live
// replica at least one, none being released, every live replica a member, and the plan (shard.Next) no move
// left: from then on, with no replica coming or going, SH-8 says nothing moves.
func (r *shardRun) waitPlanSettled() {
	r.t.Helper()
	start := time.Now()
	var ids []string
	for _, p := range r.live {
		ids = append(ids, p.identity)
	}
	slices.Sort(ids)
	harness.Eventually(r.t, 2*time.Minute, "the shard plan to settle", func(ctx context.Context) (bool, error) {
		ring, err := r.ring(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // not made yet
		}
		owned := map[string]bool{}
		for _, b := range ring.Buckets {
			if b.ReleasingTo != "" || !slices.Contains(ids, b.Owner) {
				return false, nil
			}
			owned[b.Owner] = true
		}
		members := 0
		for _, m := range ring.Members {
			if slices.Contains(ids, m.Identity) && m.Expired == nil {
				members++
			}
		}
		return len(owned) == len(ids) && members == len(ids) && shard.Next(ring, ids, time.Now()) == shard.Move{}, nil
	})
	r.t.Logf("shard plan settled in %s over %d replicas", time.Since(start).Round(100*time.Millisecond), len(ids))
}

// watchRingChanges watches the ring's ConfigMap and records every owner change and every re-split asked for,
// until the returned stop, which returns them and the number of ring versions seen.
func (r *shardRun) watchRingChanges() (stop func() (changes []string, versions int)) {
	r.t.Helper()
	cm, err := r.client.CoreV1().ConfigMaps(shardNamespace).Get(r.ctx, shard.DefaultRingName, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	last, err := shard.DecodeRing(cm)
	if err != nil {
		r.t.Fatal(err)
	}
	selector := fields.OneTermEqualSelector("metadata.name", shard.DefaultRingName).String()
	w, err := watchtools.NewRetryWatcherWithContext(r.ctx, cm.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return r.client.CoreV1().ConfigMaps(shardNamespace).Watch(ctx, o)
		},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	type result struct {
		changes  []string
		versions int
	}
	done := make(chan result)
	go func() {
		var res result
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*v1.ConfigMap)
			if !ok || ev.Type == watch.Deleted {
				res.changes = append(res.changes, fmt.Sprintf("a watch event %s %v", ev.Type, ev.Object))
				continue
			}
			res.versions++
			ring, err := shard.DecodeRing(cm)
			if err != nil {
				res.changes = append(res.changes, err.Error())
				continue
			}
			res.changes = append(res.changes, ringChanges(last, ring)...)
			last = ring
		}
		done <- res
	}()
	return func() ([]string, int) {
		select {
		case <-w.Done():
			r.t.Error("the watch of the ring ended before the rollouts did")
		default:
		}
		w.Stop()
		res := <-done
		return res.changes, res.versions
	}
}

// ringChanges says what changed from before to after: a bucket's owner, a release started, a re-split asked.
func ringChanges(before, after shard.Ring) []string {
	var out []string
	if after.Resplitting() && !before.Resplitting() || len(after.Buckets) != len(before.Buckets) {
		out = append(out, "a re-split")
	}
	for i, b := range after.Buckets {
		if i >= len(before.Buckets) {
			break
		}
		if was := before.Buckets[i]; was.Owner != b.Owner {
			out = append(out, fmt.Sprintf("bucket %d changed owner: %s → %s", i, was.Owner, b.Owner))
		} else if b.ReleasingTo != "" && was.ReleasingTo == "" {
			out = append(out, fmt.Sprintf("bucket %d released by %s to %s (%s)", i, b.Owner, b.ReleasingTo, b.ReleaseCause))
		}
	}
	return out
}

// TestShardedDeadReplicaShownAndReaped is issue 45's "a dead replica is shown dead and cleaned up" (SH-8,
// SH-7): three sharded replicas, kill -9 of the one owning the most buckets; within lease duration + 5 s
// its Lease is deleted and `kubedeploy shards` shows it dead (or no longer), and soon after it is gone from the
// ring's members and from the output; all along, the header's live replicas are the balance line's.
func TestShardedDeadReplicaShownAndReaped(t *testing.T) {
	skipShort(t)
	r := startStableRun(t, 8)
	for range 3 {
		r.startReplica()
	}
	r.waitPlanSettled()
	r.waitRolloutsComplete()
	victim := r.busiest()
	r.signal(victim, syscall.SIGKILL)
	killed := time.Now()
	victim.exited <- <-victim.exited // keep the exit for the cleanup
	r.remove(victim)
	var shownDead, leaseGone, reaped time.Duration
	harness.Eventually(t, time.Minute, "the killed replica to be shown dead and cleaned up", func(ctx context.Context) (bool, error) {
		at := time.Since(killed)
		state, gone := r.shardsRow(ctx, victim.identity)
		if shownDead == 0 && (gone || strings.HasPrefix(state, "dead")) {
			shownDead = at
		}
		if _, err := r.client.CoordinationV1().Leases(shardNamespace).Get(ctx, shard.MemberLeaseName(victim.identity), metav1.GetOptions{}); apierrors.IsNotFound(err) && leaseGone == 0 {
			leaseGone = at
		}
		ring, err := r.ring(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // read again
		}
		member := slices.ContainsFunc(ring.Members, func(m shard.Member) bool { return m.Identity == victim.identity })
		if reaped == 0 && gone && !member && leaseGone > 0 {
			reaped = at
		}
		return reaped > 0, nil
	})
	limit := shardLeaseDuration + 5*time.Second
	t.Logf("kill -9 of %s: shown dead after %s, its Lease deleted after %s, gone from the ring and the output after %s (limit %s)",
		victim.identity, shownDead.Round(100*time.Millisecond), leaseGone.Round(100*time.Millisecond), reaped.Round(100*time.Millisecond), limit)
	if shownDead > limit || leaseGone > limit {
		t.Errorf("shown dead after %s, Lease deleted after %s: more than lease duration + 5 s = %s", shownDead, leaseGone, limit)
	}
	r.waitPlanSettled()
	if state, gone := r.shardsRow(r.ctx, victim.identity); !gone {
		t.Errorf("kubedeploy shards still shows %s: %s", victim.identity, state)
	}
}

// headerLive and balanceLive find the live replicas `kubedeploy shards` counts in its header and its balance.
var (
	headerLive  = regexp.MustCompile(`buckets, (\d+) live replicas`)
	balanceLive = regexp.MustCompile(`the mean of (\d+) live replicas|Balance: no live replica`)
)

// shardsRowJSON is a replica's row in `kubedeploy shards -o json`.
type shardsRowJSON struct {
	Identity string `json:"identity"`
	State    string `json:"state"`
}

// shardsRow runs `kubedeploy shards` (as JSON, then as tables) and returns identity's state in it, or gone when
// it has no row; it fails the test when the header's live replicas are not the balance line's.
func (r *shardRun) shardsRow(ctx context.Context, identity string) (state string, gone bool) {
	r.t.Helper()
	args := []string{"shards", "--kubeconfig", filepath.Join(r.dir, "kubeconfig"), "-n", shardNamespace}
	out, err := exec.CommandContext(ctx, binary, append(args, "-o", "json")...).Output()
	if err != nil {
		r.t.Fatalf("kubedeploy shards -o json: %v", err)
	}
	var view struct {
		Replicas []shardsRowJSON `json:"replicas"`
	}
	if err := json.Unmarshal(out, &view); err != nil {
		r.t.Fatalf("kubedeploy shards -o json: %v\n%s", err, out)
	}
	table, err := exec.CommandContext(ctx, binary, args...).Output()
	if err != nil {
		r.t.Fatalf("kubedeploy shards: %v", err)
	}
	h, b := headerLive.FindSubmatch(table), balanceLive.FindSubmatch(table)
	if h == nil || b == nil || len(b[1]) > 0 && string(h[1]) != string(b[1]) {
		r.t.Errorf("the header and the balance line count different live replicas:\n%s", table)
	}
	i := slices.IndexFunc(view.Replicas, func(x shardsRowJSON) bool { return x.Identity == identity })
	if i < 0 {
		return "", true
	}
	return view.Replicas[i].State, false
}
