package shard

import (
	"math"
	"slices"
)

// Bounds divides the namespace hash space into n ranges (n ≥ 1) that cover it in order, without gap or
// overlap, with cut points between namespaces so that each range holds about the same weight, a namespace
// weighing its pods + 1 (SH-5: equal-width ranges are badly unbalanced for sequential names; the +1 spreads
// namespaces without pods too). pods maps namespace name → pods. A namespace, one hash, is never split. With
// fewer distinct namespace hashes than n, the widest ranges are halved until there are n.
func Bounds(pods map[string]int, n int) []Range {
	n = max(n, 1)
	type point struct {
		hash   uint64
		weight int
	}
	byHash := map[uint64]int{}
	total := 0
	for ns, p := range pods {
		w := max(p, 0) + 1
		byHash[Hash(ns)] += w
		total += w
	}
	points := make([]point, 0, len(byHash))
	for h, w := range byHash {
		points = append(points, point{h, w})
	}
	slices.SortFunc(points, func(a, b point) int { return cmpUint(a.hash, b.hash) })
	// cuts are range starts after the first: the hash of the first namespace of each next range.
	var cuts []uint64
	acc := 0
	for i := 1; i < len(points) && len(cuts) < n-1; i++ {
		acc += points[i-1].weight
		// Cut before points[i] once the ranges so far hold their share.
		if acc*n >= (len(cuts)+1)*total {
			cuts = append(cuts, points[i].hash)
		}
	}
	ranges := rangesFromCuts(cuts)
	for len(ranges) < n {
		ranges = splitWidest(ranges)
	}
	return ranges
}

// rangesFromCuts returns the ranges that start at 0 and at each cut (ascending, none 0).
func rangesFromCuts(cuts []uint64) []Range {
	ranges := make([]Range, 0, len(cuts)+1)
	start := uint64(0)
	for _, c := range cuts {
		ranges = append(ranges, Range{Start: start, Last: c - 1})
		start = c
	}
	return append(ranges, Range{Start: start, Last: math.MaxUint64})
}

// splitWidest halves the widest range (the first of equals); a range of one hash cannot be split, so the
// caller's loop ends because 2^64 hashes are more than any n.
func splitWidest(ranges []Range) []Range {
	widest := 0
	for i, r := range ranges {
		if r.Last-r.Start > ranges[widest].Last-ranges[widest].Start {
			widest = i
		}
	}
	r := ranges[widest]
	mid := r.Start + (r.Last-r.Start)/2
	out := slices.Clone(ranges[:widest])
	out = append(out, Range{Start: r.Start, Last: mid}, Range{Start: mid + 1, Last: r.Last})
	return append(out, ranges[widest+1:]...)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
