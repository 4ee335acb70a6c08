package shard

import (
	"fmt"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/sharding"
)

// hashNames are namespace names of every length the API server allows (1–63), and odd ones.
func hashNames() []string {
	names := []string{"", "default", "kube-system", "ns-000", "ns-119", "a", "z9"}
	for n := 1; n <= 63; n++ {
		name := make([]byte, n)
		for i := range name {
			name[i] = "abcdefghijklmnopqrstuvwxyz0123456789-"[(i*7+n)%37]
		}
		names = append(names, string(name))
	}
	for i := range 1000 {
		names = append(names, fmt.Sprintf("team-%d", i))
	}
	return names
}

// TestHashIsHashField: Hash is the value the API server's shardRange compares (SH-1), sharding.HashField's
// 16 hex digits read as a number, for every name tried.
func TestHashIsHashField(t *testing.T) {
	for _, ns := range hashNames() {
		want, err := strconv.ParseUint(sharding.HashField(ns), 16, 64)
		if err != nil {
			t.Fatalf("HashField(%q) = %q: %v", ns, sharding.HashField(ns), err)
		}
		if got := Hash(ns); got != want {
			t.Errorf("Hash(%q) = %016x, want %016x (sharding.HashField)", ns, got, want)
		}
	}
}

// BenchmarkHash: Hash against reading sharding.HashField's digits, which it replaced on the hot path (each
// watch event, queued key, lister read and fenced write of a sharded replica hashes its namespace).
func BenchmarkHash(b *testing.B) {
	const ns = "kubedeploy-bench-ns-042"
	b.Run("Hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Hash(ns)
		}
	})
	b.Run("HashField+ParseUint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = strconv.ParseUint(sharding.HashField(ns), 16, 64)
		}
	})
}
