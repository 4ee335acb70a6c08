package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RingKey is the ConfigMap data key that holds the ring as JSON.
const RingKey = "ring.json"

// DefaultRingName is the name of the ring's ConfigMap (in the namespace of the replicas' Leases).
const DefaultRingName = "kubedeploy-shards"

// Ring is the sharded mode's one shared object (SH-5, SH-7): the buckets, in hash order, covering the
// namespace hash space without gap or overlap, their weights and who owns each. It lives in a ConfigMap
// (RingKey) and changes only by an update conditioned on the resourceVersion it was read at.
type Ring struct {
	// Buckets in hash order.
	Buckets []Bucket `json:"buckets"`
	// Resplit, while set, is a change of the buckets' bounds under way (SH-5: bounds follow the namespaces
	// weighted by pods): no bucket moves, every owner stops its buckets and releases them, and once no live
	// replica owns one, the ring's buckets become Resplit's (all unowned), to be taken as usual.
	Resplit []Bucket `json:"resplit,omitempty"`
	// LastResplit is when the last re-split was asked for.
	LastResplit *metav1.MicroTime `json:"lastResplit,omitempty"`
	// Members are the replicas that joined the ring: each writes itself in when it first holds a valid Lease,
	// and out when it leaves; a peer marks one Expired once it confirmed its Lease expired, and removes it once
	// its buckets are taken and its Lease deleted (SH-8; what `kubedeploy shards` calls live or dead).
	Members []Member `json:"members,omitempty"`
	// LastRebalance is when the last rebalancing move (MoveRebalance) was started: the next may start
	// RebalanceInterval after it (SH-8).
	LastRebalance *metav1.MicroTime `json:"lastRebalance,omitempty"`
	// Moves counts the buckets that changed owner since the ring was made, by cause (MoveCause; SH-8).
	Moves map[MoveCause]int64 `json:"moves,omitempty"`
}

// Member is one replica that joined the ring.
type Member struct {
	// Identity is the replica's identity (its Lease's holder).
	Identity string `json:"identity"`
	// Joined is when it wrote itself in (its clock): for RebalanceInterval after, moves towards it are joins,
	// not rebalancing (SH-8).
	Joined metav1.MicroTime `json:"joined"`
	// Expired, once set, is when a peer confirmed from the API server that its Lease had not changed for a
	// lease duration (SH-7's check): it acts on nothing, its buckets are taken, then it is removed.
	Expired *metav1.MicroTime `json:"expired,omitempty"`
}

// Bucket is one range of the namespace hash space and its ownership.
type Bucket struct {
	// Start and End are the range's bounds as shardRange takes them (End exclusive; Range.StartHex/EndHex).
	Start string `json:"start"`
	End   string `json:"end"`
	// Pods and Namespaces are what the range holds at rest when last measured (pods, namespaces): its
	// Deployments' replicas, its ReplicaSets' not controlled by a Deployment, and its pods not controlled by a
	// ReplicaSet, so that a rollout's surge does not change it (SH-8). Pods is its weight in the plan.
	Pods       int `json:"pods"`
	Namespaces int `json:"namespaces"`
	// Owner is the identity of the replica that owns the bucket; "" when none does (released on shutdown, or
	// never taken).
	Owner string `json:"owner,omitempty"`
	// ReleasingTo, while set, names the replica Owner is handing the bucket to: Owner stops its controllers
	// and informers for the bucket, then writes Owner = ReleasingTo and clears it. At most one bucket of a
	// ring is being released at a time (SH-5).
	ReleasingTo string `json:"releasingTo,omitempty"`
	// ReleaseCause is why it is being released (MoveJoined or MoveRebalance), counted in Ring.Moves once the
	// bucket has changed owner.
	ReleaseCause MoveCause `json:"releaseCause,omitempty"`
	// Claims counts the conditional writes by which an owner won the bucket (took it, accepted it, or
	// claimed it again after its membership lapsed); each is one claim (SH-2, SH-7).
	Claims int64 `json:"claims"`
	// UnownedSince, when set, is when the bucket was last released (Owner "" or handed over): the next owner
	// reports how long it went unowned.
	UnownedSince *metav1.MicroTime `json:"unownedSince,omitempty"`
}

// Range returns b's hash range; the ring was checked by DecodeRing, so its bounds parse.
func (b Bucket) Range() Range {
	r, _ := parseRange(b.Start, b.End)
	return r
}

// Weight is b's weight in the plan: its pods + 1 (so that buckets without pods spread too).
func (b Bucket) Weight() int { return max(b.Pods, 0) + 1 }

// NewRing returns an unowned ring over ranges, each bucket's pods and namespaces counted from pods
// (namespace → pods).
func NewRing(ranges []Range, pods map[string]int) Ring {
	ring := Ring{Buckets: make([]Bucket, len(ranges))}
	for i, r := range ranges {
		ring.Buckets[i] = Bucket{Start: r.StartHex(), End: r.EndHex()}
	}
	for ns, p := range pods {
		if i := ring.Find(ns); i >= 0 {
			ring.Buckets[i].Pods += max(p, 0)
			ring.Buckets[i].Namespaces++
		}
	}
	return ring
}

// Find returns the index of the bucket holding namespace, or -1 for a ring that does not cover it (none
// that DecodeRing accepted).
func (r Ring) Find(namespace string) int {
	h := Hash(namespace)
	for i, b := range r.Buckets {
		if rg := b.Range(); h >= rg.Start && h <= rg.Last {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy of r.
func (r Ring) Clone() Ring {
	out := Ring{Buckets: cloneBuckets(r.Buckets), Resplit: cloneBuckets(r.Resplit),
		LastResplit: cloneTime(r.LastResplit), LastRebalance: cloneTime(r.LastRebalance)}
	if r.Members != nil {
		out.Members = make([]Member, len(r.Members))
		for i, m := range r.Members {
			out.Members[i] = m
			out.Members[i].Expired = cloneTime(m.Expired)
		}
	}
	if r.Moves != nil {
		out.Moves = maps.Clone(r.Moves)
	}
	return out
}

func cloneTime(t *metav1.MicroTime) *metav1.MicroTime {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func cloneBuckets(buckets []Bucket) []Bucket {
	if buckets == nil {
		return nil
	}
	out := make([]Bucket, len(buckets))
	for i, b := range buckets {
		out[i] = b
		out[i].UnownedSince = cloneTime(b.UnownedSince)
	}
	return out
}

// Validate returns an error unless r has at least one bucket, every bound parses, the buckets cover the
// hash space in order without gap or overlap, and at most one bucket is being released (its ReleasingTo set,
// and only with an Owner); a Resplit must be such a cover too, with no owner; Members name distinct, non-empty
// identities.
func (r Ring) Validate() error {
	if err := validateBuckets(r.Buckets); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, m := range r.Members {
		if m.Identity == "" || seen[m.Identity] {
			return fmt.Errorf("member %d: identity %q is empty or repeated", i, m.Identity)
		}
		seen[m.Identity] = true
	}
	if len(r.Resplit) == 0 {
		return nil
	}
	if err := validateBuckets(r.Resplit); err != nil {
		return fmt.Errorf("resplit: %w", err)
	}
	for i, b := range r.Resplit {
		if b.Owner != "" || b.ReleasingTo != "" {
			return fmt.Errorf("resplit: bucket %d has an owner", i)
		}
	}
	return nil
}

// Resplitting reports whether a re-split is under way.
func (r Ring) Resplitting() bool { return len(r.Resplit) > 0 }

func validateBuckets(buckets []Bucket) error {
	r := Ring{Buckets: buckets}
	if len(r.Buckets) == 0 {
		return errors.New("the ring has no buckets")
	}
	next, releasing := uint64(0), 0
	for i, b := range r.Buckets {
		rg, err := parseRange(b.Start, b.End)
		if err != nil {
			return fmt.Errorf("bucket %d: %w", i, err)
		}
		if rg.Start != next || (i > 0 && next == 0) {
			return fmt.Errorf("bucket %d starts at %s: the buckets must cover the hash space in order", i, b.Start)
		}
		next = rg.Last + 1
		if b.ReleasingTo != "" {
			releasing++
			if b.Owner == "" {
				return fmt.Errorf("bucket %d is released to %q by no owner", i, b.ReleasingTo)
			}
		}
	}
	if r.Buckets[len(r.Buckets)-1].Range().Last != math.MaxUint64 {
		return errors.New("the last bucket must end at " + hashSpaceEnd)
	}
	if releasing > 1 {
		return fmt.Errorf("%d buckets are being released; at most one may be", releasing)
	}
	return nil
}

// DecodeRing reads the ring from cm (RingKey) and validates it. The error says what is wrong and where, so
// that an operator can fix or delete the ConfigMap: a ring that does not decode is never overwritten.
func DecodeRing(cm *v1.ConfigMap) (Ring, error) {
	raw, ok := cm.Data[RingKey]
	if !ok {
		return Ring{}, fmt.Errorf("ConfigMap %s/%s has no %q key", cm.Namespace, cm.Name, RingKey)
	}
	var ring Ring
	if err := json.Unmarshal([]byte(raw), &ring); err != nil {
		return Ring{}, fmt.Errorf("ConfigMap %s/%s %q: %w", cm.Namespace, cm.Name, RingKey, err)
	}
	if err := ring.Validate(); err != nil {
		return Ring{}, fmt.Errorf("ConfigMap %s/%s %q: %w", cm.Namespace, cm.Name, RingKey, err)
	}
	return ring, nil
}

// EncodeRing returns a copy of cm (or a new ConfigMap namespace/name when cm is nil) holding ring.
func EncodeRing(cm *v1.ConfigMap, namespace, name string, ring Ring) *v1.ConfigMap {
	raw, _ := json.MarshalIndent(ring, "", "  ") // plain data: cannot fail
	var out *v1.ConfigMap
	if cm == nil {
		out = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	} else {
		out = cm.DeepCopy()
	}
	if out.Data == nil {
		out.Data = map[string]string{}
	}
	out.Data[RingKey] = string(raw)
	return out
}
