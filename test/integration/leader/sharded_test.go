package leader

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// writeLog records, per member, the namespaces of the writes it sent to Deployments, ReplicaSets and pods.
type writeLog struct {
	mu sync.Mutex
	by map[string]map[string]int // identity → namespace → writes
}

func (w *writeLog) wrap(identity string, rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			if ns, ok := workloadNamespace(r.URL.Path); ok {
				w.mu.Lock()
				if w.by[identity] == nil {
					w.by[identity] = map[string]int{}
				}
				w.by[identity][ns]++
				w.mu.Unlock()
			}
		}
		return rt.RoundTrip(r)
	})
}

// workloadNamespace returns the namespace of a request path to a namespace's Deployments, ReplicaSets or pods.
func workloadNamespace(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" && slices.Contains([]string{"deployments", "replicasets", "pods"}, parts[i+2]) {
			return parts[i+1], true
		}
	}
	return "", false
}

func (w *writeLog) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.by = map[string]map[string]int{}
}

// writers returns, per namespace, the members that wrote in it.
func (w *writeLog) writers() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]string{}
	for id, nss := range w.by {
		for ns := range nss {
			out[ns] = append(out[ns], id)
		}
	}
	return out
}

// shardLease is the sharded members' timing: as shortLease.
var shardLease = manager.LeaderElection{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}

// startShardMember runs a sharded manager (both controllers, 8 buckets) as identity, its ring and Lease in ringNS.
func startShardMember(t *testing.T, identity, ringNS string, writes *writeLog) *member {
	t.Helper()
	return runShardMember(t, identity, env.Config, ringNS, 8, func(rt http.RoundTripper) http.RoundTripper { return writes.wrap(identity, rt) })
}

// runShardMember runs a sharded manager (both controllers, buckets buckets, shardLease's timing) as identity on
// rc wrapped by wrap, its ring and Lease in ringNS, until the test ends (or stop/crash is called).
func runShardMember(t *testing.T, identity string, rc *rest.Config, ringNS string, buckets int, wrap func(http.RoundTripper) http.RoundTripper) *member {
	t.Helper()
	m := &member{identity: identity, link: &link{}, done: make(chan error, 1)}
	rc = rest.CopyConfig(rc)
	rc.Wrap(m.link.wrap)
	rc.Wrap(wrap)
	le := shardLease
	le.Identity, le.ResourceNamespace = identity, ringNS
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName(identity)))
	m.cancel = cancel
	go func() {
		m.done <- manager.Run(ctx, manager.Config{
			RESTConfig: rc, Controllers: manager.KnownControllers, Version: "test",
			LeaderElection: le, Sharding: manager.Sharding{Enabled: true, Buckets: buckets},
		})
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// ringOf reads the ring in ringNS.
func ringOf(ctx context.Context, ringNS string) (shard.Ring, error) {
	cm, err := env.Client.CoreV1().ConfigMaps(ringNS).Get(ctx, shard.DefaultRingName, metav1.GetOptions{})
	if err != nil {
		return shard.Ring{}, err
	}
	return shard.DecodeRing(cm)
}

// ownerOf returns the owner of namespace's bucket in ring.
func ownerOf(ring shard.Ring, namespace string) string {
	return ring.Buckets[ring.Find(namespace)].Owner
}

// TestShardedReplicasSplitTheNamespaces runs three sharded replicas (SH-1, SH-5): every bucket gets an owner,
// each replica owns some, every Deployment rolls out, and in a steady ring each namespace is written by its
// bucket's owner only. Then one replica is cut off as by kill -9 (SH-2, SH-7): its buckets are taken by the
// others once its Lease expires, and a rollout in each of its namespaces completes.
func TestShardedReplicasSplitTheNamespaces(t *testing.T) {
	ringNS := env.Namespace(t)
	namespaces := make([]string, 12)
	for i := range namespaces {
		namespaces[i] = env.Namespace(t)
		d := harness.NewDeployment(namespaces[i], "web", 4, "nginx:1.9")
		if _, err := env.Client.AppsV1().Deployments(namespaces[i]).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writes := &writeLog{}
	writes.reset()
	members := map[string]*member{}
	for _, id := range []string{"shard-a", "shard-b", "shard-c"} {
		members[id] = startShardMember(t, id, ringNS, writes)
	}
	for _, ns := range namespaces {
		harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
	}
	// Settled once the pods exist: the ring was measured before they did, and its owners then rewrite the
	// buckets' pods and move buckets to spread them.
	waitRingSpread(t, ringNS, []string{"shard-a", "shard-b", "shard-c"})
	ring := rollEverywhere(t, ringNS, namespaces, writes, "nginx:1.10")
	victim := ownerOf(ring, namespaces[0])
	members[victim].crash(t)
	live := slices.DeleteFunc([]string{"shard-a", "shard-b", "shard-c"}, func(id string) bool { return id == victim })
	start := time.Now()
	waitRingSpread(t, ringNS, live)
	t.Logf("the buckets of %s were all taken %v after it was cut off", victim, time.Since(start).Round(100*time.Millisecond))
	rollEverywhere(t, ringNS, namespaces, writes, "nginx:1.11")
}

// waitRingSpread waits until every bucket is owned by one of live, each of live owns at least one, and the
// ring is settled: every bucket's pods in the ring are close enough to the cluster's steady pods that no owner rewrites
// them (shard's refresh rule: off by more than 10 and a fifth), and the plan (shard.Next) moves nothing more.
// Then no bucket moves during the rollouts that follow.
func waitRingSpread(t *testing.T, ringNS string, live []string) {
	t.Helper()
	harness.Eventually(t, time.Minute, fmt.Sprintf("a settled ring spread over %v", live), func(ctx context.Context) (bool, error) {
		ring, err := ringOf(ctx, ringNS)
		if err != nil {
			return false, nil
		}
		// The ring's counts are steady pods (SH-8: the Deployments' replicas, not the pods of the moment, which
		// a namespace being deleted by an earlier test loses before its Deployments).
		meta, err := metadata.NewForConfig(env.Config)
		if err != nil {
			return false, err
		}
		steady, err := shard.SteadyByNamespace(ctx, env.Client, meta)
		if err != nil {
			return false, nil
		}
		actual := make([]int, len(ring.Buckets))
		for ns, n := range steady {
			actual[ring.Find(ns)] += n
		}
		owned := map[string]int{}
		for i, b := range ring.Buckets {
			if !slices.Contains(live, b.Owner) || b.ReleasingTo != "" {
				return false, nil
			}
			if d := max(actual[i]-b.Pods, b.Pods-actual[i]); d > 10 && d*5 > b.Pods {
				return false, nil
			}
			owned[b.Owner]++
		}
		return len(owned) == len(live) && shard.Next(ring, live, time.Now()) == shard.Move{}, nil
	})
}

// rollEverywhere changes the image of every namespace's Deployment, waits for every rollout, and checks that
// each namespace was written by one replica only, its bucket's owner, in a rollout during which no bucket
// moved. A rollout's own pods can move the ring (an owner rewrites a bucket's pods once they are off by more
// than 10, and the plan may then move a bucket), so a rollout during which a bucket moved is logged and done
// again with another image, up to three times. It returns the ring.
func rollEverywhere(t *testing.T, ringNS string, namespaces []string, writes *writeLog, image string) shard.Ring {
	t.Helper()
	ctx := harness.Context(t, 6*time.Minute)
	for attempt := 0; ; attempt++ {
		img := image
		if attempt > 0 {
			img = fmt.Sprintf("%s-%d", image, attempt)
		}
		before, err := ringOf(ctx, ringNS)
		if err != nil {
			t.Fatal(err)
		}
		writes.reset()
		for _, ns := range namespaces {
			harness.SetImage(ctx, t, env.Client, ns, "web", "web", img)
		}
		for _, ns := range namespaces {
			harness.WaitComplete(t, env.Client, ns, "web", 2*time.Minute)
		}
		after, err := ringOf(ctx, ringNS)
		if err != nil {
			t.Fatal(err)
		}
		if moved := ringMoved(before, after); moved != "" {
			if attempt == 2 {
				t.Fatalf("a bucket moved during each of 3 rollouts, the last: %s", moved)
			}
			t.Logf("rolling out again: a bucket moved during the rollout of %s (%s)", img, moved)
			continue
		}
		for ns, ids := range writes.writers() {
			if !slices.Contains(namespaces, ns) {
				continue
			}
			if len(ids) != 1 || ids[0] != ownerOf(after, ns) {
				t.Errorf("namespace %s was written by %v; its bucket's owner is %s (SH-1)", ns, ids, ownerOf(after, ns))
			}
		}
		return after
	}
}

// ringMoved describes the first bucket whose owner or release differs between before and after, "" if none.
func ringMoved(before, after shard.Ring) string {
	for i, b := range before.Buckets {
		if a := after.Buckets[i]; a.Owner != b.Owner || a.ReleasingTo != b.ReleasingTo {
			return fmt.Sprintf("bucket %d from %s to %s", i, b.Owner, a.Owner)
		}
	}
	return ""
}
