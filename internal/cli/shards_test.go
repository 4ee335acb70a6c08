package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// shardsNow is the tests' clock.
var shardsNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// quarter returns the namespaces "ns-<i>" whose hash falls in quarter q of the hash space (the tests' ring has
// four equal buckets), n of them.
func quarter(q uint64, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		if shard.Hash(ns)>>62 == q {
			out = append(out, ns)
		}
	}
	return out
}

// quarters is a ring of four equal buckets: 0 owned by shard-a (a member for 10 minutes), 1 by shard-b (a
// member its peers found expired 4s ago), 2 by shard-a being released to shard-c (not a member yet, owning
// nothing yet), 3 unowned; its steady pods 20, 10, 36 (40 pods now: a rollout's surge) and 2; 4 initial moves and 1 join so far, the last rebalance 2 minutes ago.
func quarters() shard.Ring {
	ring := shard.Ring{}
	for q := range uint64(4) {
		last := (q+1)<<62 - 1
		if q == 3 {
			last = math.MaxUint64
		}
		r := shard.Range{Start: q << 62, Last: last}
		ring.Buckets = append(ring.Buckets, shard.Bucket{Start: r.StartHex(), End: r.EndHex(), Pods: []int{20, 10, 36, 2}[q]})
	}
	ring.Buckets[0].Owner = "shard-a"
	ring.Buckets[1].Owner = "shard-b"
	ring.Buckets[2].Owner, ring.Buckets[2].ReleasingTo = "shard-a", "shard-c"
	joined := metav1.MicroTime{Time: shardsNow.Add(-10 * time.Minute)}
	ring.Members = []shard.Member{{Identity: "shard-a", Joined: joined},
		{Identity: "shard-b", Joined: joined, Expired: &metav1.MicroTime{Time: shardsNow.Add(-4 * time.Second)}}}
	ring.Moves = map[shard.MoveCause]int64{shard.MoveInitial: 4, shard.MoveJoined: 1}
	ring.LastRebalance = &metav1.MicroTime{Time: shardsNow.Add(-2 * time.Minute)}
	return ring
}

func memberLease(identity, ring string, renewedAgo time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: shard.MemberLeaseName(identity), Namespace: "kube-system", Labels: map[string]string{shard.MemberLabel: ring}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime: &metav1.MicroTime{Time: shardsNow.Add(-renewedAgo)}},
	}
}

// shardsCluster returns fake clients holding ring (nil: none) and the namespaces of each quarter: pods[q] pods
// in each of quarter q's namespaces, 2 namespaces a quarter.
func shardsCluster(t *testing.T, ring *v1.ConfigMap, pods [4]int) (*fake.Clientset, *metadatafake.FakeMetadataClient) {
	t.Helper()
	objs := []runtime.Object{
		memberLease("shard-a", shard.DefaultRingName, 2*time.Second),
		memberLease("shard-b", shard.DefaultRingName, 20*time.Second),
		memberLease("shard-c", shard.DefaultRingName, time.Second),
		memberLease("other-ring", "another-ring", time.Second),
	}
	if ring != nil {
		objs = append(objs, ring)
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var podObjs []runtime.Object
	for q, n := range pods {
		for _, ns := range quarter(uint64(q), 2) {
			objs = append(objs, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			for i := range n {
				podObjs = append(podObjs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%d", i)}})
			}
		}
	}
	return fake.NewClientset(objs...), metadatafake.NewSimpleMetadataClient(scheme, podObjs...)
}

// TestShardsTable: each replica with its state as its peers judge it (live, joining, dead), buckets,
// namespaces, pods and share; the unowned buckets; each bucket with its range, owner, the replica it is
// released to, its pods now and its steady pods; the header's live replicas are the balance's, and the pods in
// buckets no live replica owns are said; the moves by cause. A Lease of another ring is not shown.
func TestShardsTable(t *testing.T) {
	ring := shard.EncodeRing(nil, "kube-system", shard.DefaultRingName, quarters())
	client, meta := shardsCluster(t, ring, [4]int{10, 5, 20, 1})
	view, err := readShards(context.Background(), client, meta, "kube-system", shard.DefaultRingName, shardsNow)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printShards(&out, view); err != nil {
		t.Fatal(err)
	}
	want := `Ring kube-system/kubedeploy-shards: 4 buckets, 2 live replicas (1 dead), 8 namespaces, 72 pods

REPLICA     STATE                  BUCKETS   NAMESPACES   PODS   SHARE
shard-a     live, joined 10m ago   0,2       4            60     83.3%
shard-b     dead: expired 4s ago   1         2            10     13.9%
shard-c     joining                -         0            0      0.0%
(unowned)   -                      3         2            2      2.8%

BUCKET   RANGE                                       OWNER     RELEASING TO   NAMESPACES   PODS   STEADY
0        [0x0000000000000000, 0x4000000000000000)    shard-a   -              2            20     20
1        [0x4000000000000000, 0x8000000000000000)    shard-b   -              2            10     10
2        [0x8000000000000000, 0xc000000000000000)    shard-a   shard-c        2            40     36
3        [0xc000000000000000, 0x10000000000000000)   -         -              2            2      2

Balance: 2.00 (the biggest replica, shard-a, holds 60 pods; the mean of 2 live replicas is 30.0); 12 pods are in buckets no live replica owns
Moves: initial 4, joined 1, left 0, rebalance 0, resplit 0 (last rebalance 2m ago; at most one every 5m)
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestShardsJSON: -o json prints the same view, with the ring's steady pods beside the pods now.
func TestShardsJSON(t *testing.T) {
	ring := shard.EncodeRing(nil, "kube-system", shard.DefaultRingName, quarters())
	client, meta := shardsCluster(t, ring, [4]int{1, 1, 1, 1})
	var out bytes.Buffer
	view, err := readShards(context.Background(), client, meta, "kube-system", shard.DefaultRingName, shardsNow)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&out)
	if err := enc.Encode(view); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Ring     string `json:"ring"`
		Replicas []struct {
			Identity string `json:"identity"`
			Live     bool   `json:"live"`
			Buckets  []int  `json:"buckets"`
		} `json:"replicas"`
		Buckets []struct {
			Pods         int `json:"pods"`
			MeasuredPods int `json:"measuredPods"`
		} `json:"buckets"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Ring != "kube-system/kubedeploy-shards" || len(got.Replicas) != 3 || got.Replicas[1].Identity != "shard-b" || got.Replicas[1].Live {
		t.Errorf("replicas %+v of %s", got.Replicas, got.Ring)
	}
	if len(got.Buckets) != 4 || got.Buckets[2].Pods != 2 || got.Buckets[2].MeasuredPods != 36 {
		t.Errorf("buckets %+v", got.Buckets)
	}
}

// TestLiveOf is `kubedeploy shards`' liveness, the peers' (SH-8): found expired by a peer, without a Lease, or
// never renewed, a replica is dead; with a Lease and not found expired, it is live (a member) or joining (not
// yet), unless this machine's clock says its Lease went unrenewed for a minute past its duration (no live peer
// was there to find it expired).
func TestLiveOf(t *testing.T) {
	renewed := func(ago time.Duration) replicaView {
		return replicaView{Lease: "l", RenewTime: &metav1.Time{Time: shardsNow.Add(-ago)}, renewedAgo: ago}
	}
	member := func(r replicaView) replicaView { r.Joined, r.joinedAgo = &metav1.Time{}, 3*time.Minute; return r }
	expired := member(renewed(20 * time.Second))
	expired.Expired, expired.expiredAgo = &metav1.Time{}, 5*time.Second
	for _, tc := range []struct {
		name  string
		r     replicaView
		live  bool
		state string
	}{
		{"member", member(renewed(time.Second)), true, "live, joined 3m ago"},
		{"not a member yet", renewed(time.Second), true, "joining"},
		{"renewed 13s ago, found expired", expired, false, "dead: expired 5s ago"},
		{"a member that left", member(replicaView{}), false, "dead: no Lease"},
		{"never renewed", replicaView{Lease: "l"}, false, "dead: never renewed"},
		{"late but within the margin", member(renewed(70 * time.Second)), true, "live, joined 3m ago"},
		{"no peer to find it expired", member(renewed(3 * time.Minute)), false, "dead: not renewed for 3m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if live, state := liveOf(tc.r, 15*time.Second); live != tc.live || state != tc.state {
				t.Errorf("liveOf = %v, %q; want %v, %q", live, state, tc.live, tc.state)
			}
		})
	}
}

// TestShardsResplit: a change of the ring's bounds under way (SH-5) is said before the tables.
func TestShardsResplit(t *testing.T) {
	ring := quarters()
	ring.Resplit = quarters().Buckets[:2]
	ring.Resplit[0].Owner, ring.Resplit[1].Owner, ring.Resplit[0].ReleasingTo = "", "", ""
	ring.Resplit[0].End, ring.Resplit[1].Start, ring.Resplit[1].End = "0x8000000000000000", "0x8000000000000000", "0x10000000000000000"
	ring.LastResplit = &metav1.MicroTime{Time: shardsNow.Add(-90 * time.Second)}
	client, meta := shardsCluster(t, shard.EncodeRing(nil, "kube-system", shard.DefaultRingName, ring), [4]int{1, 1, 1, 1})
	view, err := readShards(context.Background(), client, meta, "kube-system", shard.DefaultRingName, shardsNow)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printShards(&out, view); err != nil {
		t.Fatal(err)
	}
	want := "Re-split under way (asked 90s ago): every owner releases its buckets; once no live replica owns one, the ring's 4 buckets become 2 new ones\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("got\n%s\nwant a line %q", out.String(), want)
	}
}

// TestShardsErrors: no ring, and a ring that does not decode, say so.
func TestShardsErrors(t *testing.T) {
	bad := shard.EncodeRing(nil, "kube-system", shard.DefaultRingName, shard.Ring{})
	for _, tc := range []struct {
		name string
		ring *v1.ConfigMap
		want string
	}{
		{"no ring", nil, "no shard ring kube-system/kubedeploy-shards: is kubedeploy controllers running with --sharding?"},
		{"undecodable", bad, `ConfigMap kube-system/kubedeploy-shards "ring.json": the ring has no buckets`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, meta := shardsCluster(t, tc.ring, [4]int{})
			_, err := readShards(context.Background(), client, meta, "kube-system", shard.DefaultRingName, shardsNow)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestShardsOutputFlag: an unknown -o is refused before the cluster is read.
func TestShardsOutputFlag(t *testing.T) {
	_, err := execute(t, NewRootCommand(), "shards", "-o", "yaml")
	if err == nil || !strings.Contains(err.Error(), "--output must be json") {
		t.Errorf("error %v", err)
	}
}

func TestIndexRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, "-"}, {[]int{3}, "3"}, {[]int{0, 1, 2, 3, 7}, "0-3,7"}, {[]int{1, 3, 4, 6}, "1,3-4,6"},
	} {
		if got := indexRanges(tc.in); got != tc.want {
			t.Errorf("indexRanges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
