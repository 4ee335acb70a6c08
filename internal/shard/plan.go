package shard

import "slices"

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

// Move is the next change of ownership Next asks for: Kind, the bucket's index in the ring, and the replicas
// it moves from ("" for an unowned bucket or one whose owner is not live) and to.
type Move struct {
	Kind   MoveKind
	Bucket int
	From   string
	To     string
}

// Next returns the one next move of ring among the live replicas (identities), a pure function every replica
// computes alike (SH-5): first, the heaviest bucket no live replica owns goes to the least loaded live replica
// (Take); else, unless a bucket is being released, the most loaded replica releases to the least loaded one
// the bucket that best halves their difference, but only when that narrows their difference by more than a
// twentieth of the mean load (so the ring settles instead of trading single pods). Load is the buckets'
// Weight. Ties break by bucket index and identity, so replicas with the same view agree. With no live
// replica, or while the ring is being re-split, it returns NoMove.
func Next(ring Ring, live []string) Move {
	if len(live) == 0 || ring.Resplitting() {
		return Move{}
	}
	loads := loadsOf(ring, live)
	if i := heaviestOrphan(ring, loads); i >= 0 {
		return Move{Kind: Take, Bucket: i, From: ring.Buckets[i].Owner, To: leastLoaded(loads)}
	}
	if slices.ContainsFunc(ring.Buckets, func(b Bucket) bool { return b.ReleasingTo != "" }) {
		return Move{}
	}
	return balance(ring, loads)
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

// balance returns the Release from the most to the least loaded replica that best halves their difference,
// if it narrows it by more than a twentieth of the mean load (at least 1); else NoMove.
func balance(ring Ring, loads map[string]int) Move {
	from, to := mostLoaded(loads), leastLoaded(loads)
	diff := loads[from] - loads[to]
	total := 0
	for _, l := range loads {
		total += l
	}
	tolerance := max(1, total/len(loads)/20)
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
	if best < 0 {
		return Move{}
	}
	return Move{Kind: Release, Bucket: best, From: from, To: to}
}

func abs(x int) int { return max(x, -x) }
