package shard

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
)

// NamespaceField is the field the ring shards by, in the API server's shardRange syntax.
const NamespaceField = "object.metadata.namespace"

// hashSpaceEnd is the exclusive end of the hash space (2^64) as shardRange writes it.
const hashSpaceEnd = "0x10000000000000000"

// Range is a half-open range [Start, Last] of the 64-bit namespace hash space, Last inclusive so that the
// last range can end at 2^64-1.
type Range struct {
	Start uint64
	Last  uint64
}

// Hash returns the 64-bit FNV-1a hash of a namespace name (SH-1), the value the API server's shardRange
// compares: sharding.HashField's, which is hash/fnv's 64-bit FNV-1a formatted as 16 hex digits. It takes
// hash/fnv's sum without that string, because every watch event, queued key, lister read and write of a
// sharded replica hashes its namespace (TestHashIsHashField checks the two agree; BenchmarkHash measures both).
func Hash(namespace string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, namespace) // a hash's Write never fails
	return h.Sum64()
}

// Contains reports whether namespace's hash is in r.
func (r Range) Contains(namespace string) bool {
	h := Hash(namespace)
	return h >= r.Start && h <= r.Last
}

// StartHex and EndHex are r's bounds as shardRange takes them: 0x and 16 hex digits, the end exclusive
// ("0x10000000000000000" for a range that ends at 2^64-1).
func (r Range) StartHex() string { return fmt.Sprintf("0x%016x", r.Start) }

// EndHex: see StartHex.
func (r Range) EndHex() string {
	if r.Last == math.MaxUint64 {
		return hashSpaceEnd
	}
	return fmt.Sprintf("0x%016x", r.Last+1)
}

// String is r as "[0x…, 0x…)".
func (r Range) String() string { return "[" + r.StartHex() + ", " + r.EndHex() + ")" }

// parseRange reads the bounds StartHex and EndHex wrote; it returns an error naming the bad bound.
func parseRange(start, end string) (Range, error) {
	s, err := parseHex(start)
	if err != nil {
		return Range{}, fmt.Errorf("start %q: %w", start, err)
	}
	if end == hashSpaceEnd {
		return Range{Start: s, Last: math.MaxUint64}, nil
	}
	e, err := parseHex(end)
	if err != nil {
		return Range{}, fmt.Errorf("end %q: %w", end, err)
	}
	if e <= s {
		return Range{}, fmt.Errorf("end %q is not after start %q", end, start)
	}
	return Range{Start: s, Last: e - 1}, nil
}

func parseHex(s string) (uint64, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) != 16 {
		return 0, fmt.Errorf("want 0x and 16 hex digits")
	}
	return strconv.ParseUint(digits, 16, 64)
}

// Selector returns the ListOptions.ShardSelector that selects the namespaces of ranges (SH-4):
// shardRange(object.metadata.namespace, '0x…', '0x…') calls joined by " || "; "" for no range.
func Selector(ranges ...Range) string {
	parts := make([]string, 0, len(ranges))
	for _, r := range ranges {
		parts = append(parts, fmt.Sprintf("shardRange(%s, '%s', '%s')", NamespaceField, r.StartHex(), r.EndHex()))
	}
	return strings.Join(parts, " || ")
}
