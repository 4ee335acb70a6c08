package shard

import (
	"slices"
	"time"
)

// MoveKind is what Next asks of one replica.
type MoveKind string

const (
	// NoMove: the ring is as balanced as it should be, or a release is under way.
	NoMove MoveKind = ""
	// Take: To takes a bucket that no live replica owns (released, or its owner's Lease expired; SH-7).
	Take MoveKind = "Take"
	// Release: From starts handing a bucket to To, to balance the ring (SH-5).
	Release MoveKind = "Release"
)

// MoveCause is why a bucket changes owner (SH-8): the key of Ring.Moves and the cause label of
// kubedeploy_shard_moves_total.
type MoveCause string

const (
	// MoveInitial: a bucket of a new ring, never owned before, taken.
	MoveInitial MoveCause = "initial"
	// MoveResplit: a bucket of the new bounds a re-split made, taken.
	MoveResplit MoveCause = "resplit"
	// MoveLeft: a bucket whose owner left (released it on shutdown) or died (its Lease expired), taken.
	MoveLeft MoveCause = "left"
	// MoveJoined: a bucket released to a replica that joined the ring less than RebalanceInterval ago.
	MoveJoined MoveCause = "joined"
	// MoveRebalance: a bucket released between replicas that joined longer ago, to spread the steady pods: at
	// most one every RebalanceInterval.
	MoveRebalance MoveCause = "rebalance"
)

// MoveCauses are the causes, in the order `kubedeploy shards` lists them.
var MoveCauses = []MoveCause{MoveInitial, MoveJoined, MoveLeft, MoveRebalance, MoveResplit}

// RebalanceInterval is the least time between two rebalancing moves (Ring.LastRebalance, so every replica
// agrees after restarts), and how long after joining a replica still gets the buckets it needs at once (SH-8).
const RebalanceInterval = 5 * time.Minute

// Move is the next change of ownership Next asks for: Kind, the bucket's index in the ring, the replicas it
// moves from ("" for an unowned bucket or one whose owner is not live) and to, and why.
type Move struct {
	Kind   MoveKind
	Bucket int
	From   string
	To     string
	Cause  MoveCause
}

// Next returns the one next move of ring among the live replicas (identities) at now, a pure function every
// replica computes alike (SH-5, SH-8):
//
//   - first, the heaviest bucket no live replica owns goes to the least loaded live replica (Take: its cause
//     MoveInitial, MoveResplit or MoveLeft), whenever;
//   - else, unless a bucket is being released, the most loaded replica releases to the least loaded one the
//     bucket that best halves their difference, but only when that narrows their difference by more than a
//     tenth of the mean load (so the ring settles instead of trading a few pods). To a replica that joined less
//     than RebalanceInterval ago (Ring.Joining) this is a join (MoveJoined) and made at once; otherwise it is a
//     rebalance (MoveRebalance), made only RebalanceInterval after the last one (Ring.RebalanceDue), and while
//     one is not due a join to the least loaded joining replica is still made.
//
// Load is the buckets' Weight, from steady pod counts: a rollout's surge moves nothing. Ties break by bucket
// index and identity, so replicas with the same view agree. With no live replica, or while the ring is being
// re-split, it returns NoMove.
func Next(ring Ring, live []string, now time.Time) Move {
	if len(live) == 0 || ring.Resplitting() {
		return Move{}
	}
	loads := loadsOf(ring, live)
	if i := heaviestOrphan(ring, loads); i >= 0 {
		b := ring.Buckets[i]
		return Move{Kind: Take, Bucket: i, From: b.Owner, To: leastLoaded(loads), Cause: takeCause(b)}
	}
	if slices.ContainsFunc(ring.Buckets, func(b Bucket) bool { return b.ReleasingTo != "" }) {
		return Move{}
	}
	from := mostLoaded(loads)
	if m := balance(ring, loads, from, leastLoaded(loads)); m.Kind != NoMove {
		if ring.Joining(m.To, now) {
			m.Cause = MoveJoined
			return m
		}
		if ring.RebalanceDue(now) {
			m.Cause = MoveRebalance
			return m
		}
	}
	joining := map[string]int{}
	for id, l := range loads {
		if id != from && ring.Joining(id, now) {
			joining[id] = l
		}
	}
	if len(joining) == 0 {
		return Move{}
	}
	m := balance(ring, loads, from, leastLoaded(joining))
	m.Cause = MoveJoined
	if m.Kind == NoMove {
		return Move{}
	}
	return m
}

// takeCause is why an orphaned bucket is taken: its owner left or died, or it was never owned (a new ring's,
// or a re-split's: released once, UnownedSince set).
func takeCause(b Bucket) MoveCause {
	switch {
	case b.Owner != "" || b.Claims > 0:
		return MoveLeft
	case b.UnownedSince != nil:
		return MoveResplit
	}
	return MoveInitial
}

// Joining reports whether identity joined the ring less than RebalanceInterval before now, or is not (or no
// longer) a member: moves towards it are joins (SH-8).
func (r Ring) Joining(identity string, now time.Time) bool {
	i := slices.IndexFunc(r.Members, func(m Member) bool { return m.Identity == identity })
	if i < 0 || r.Members[i].Expired != nil {
		return true
	}
	return now.Sub(r.Members[i].Joined.Time) < RebalanceInterval
}

// RebalanceDue reports whether a rebalancing move may start at now: none yet, or the last RebalanceInterval
// ago or more (a last one more than RebalanceInterval in the future, a clock gone wrong, does not block).
func (r Ring) RebalanceDue(now time.Time) bool {
	if r.LastRebalance == nil {
		return true
	}
	d := now.Sub(r.LastRebalance.Time)
	return d >= RebalanceInterval || d < -RebalanceInterval
}

// loadsOf returns each live replica's load (sum of its buckets' Weight).
func loadsOf(ring Ring, live []string) map[string]int {
	loads := make(map[string]int, len(live))
	for _, id := range live {
		loads[id] = 0
	}
	for _, b := range ring.Buckets {
		if _, ok := loads[b.Owner]; ok {
			loads[b.Owner] += b.Weight()
		}
	}
	return loads
}

// heaviestOrphan returns the index of the heaviest bucket whose owner is not live (the first of equals), or -1.
func heaviestOrphan(ring Ring, loads map[string]int) int {
	best := -1
	for i, b := range ring.Buckets {
		if _, ok := loads[b.Owner]; ok {
			continue
		}
		if best < 0 || b.Weight() > ring.Buckets[best].Weight() {
			best = i
		}
	}
	return best
}

// leastLoaded and mostLoaded return the replica with the lowest (highest) load, ties to the lowest identity.
func leastLoaded(loads map[string]int) string {
	return pick(loads, func(a, b int) bool { return a < b })
}

func mostLoaded(loads map[string]int) string {
	return pick(loads, func(a, b int) bool { return a > b })
}

func pick(loads map[string]int, better func(a, b int) bool) string {
	ids := make([]string, 0, len(loads))
	for id := range loads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	best := ids[0]
	for _, id := range ids[1:] {
		if better(loads[id], loads[best]) {
			best = id
		}
	}
	return best
}

// balance returns the Release from `from` to `to` of from's bucket that best halves their difference, if it
// narrows it by more than a tenth of the mean load (at least 1); else NoMove. The cause is the caller's.
func balance(ring Ring, loads map[string]int, from, to string) Move {
	diff := loads[from] - loads[to]
	total := 0
	for _, l := range loads {
		total += l
	}
	tolerance := max(1, total/len(loads)/10)
	best, bestGain := -1, tolerance
	for i, b := range ring.Buckets {
		if b.Owner != from {
			continue
		}
		gain := diff - abs(diff-2*b.Weight())
		if gain > bestGain {
			best, bestGain = i, gain
		}
	}
	if best < 0 || from == to {
		return Move{}
	}
	return Move{Kind: Release, Bucket: best, From: from, To: to}
}

func abs(x int) int { return max(x, -x) }
