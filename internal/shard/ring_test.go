package shard

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestDecodeRing: a ring round-trips through its ConfigMap, and a broken one is refused with an error that says
// what is wrong (nothing acts on it, nothing overwrites it).
func TestDecodeRing(t *testing.T) {
	pods := sequential("ns-%03d", 40, 10)
	ring := NewRing(Bounds(pods, 4), pods)
	ring.Buckets[1].Owner, ring.Buckets[1].Claims = "a", 3
	got, err := DecodeRing(EncodeRing(nil, "kube-system", DefaultRingName, ring))
	if err != nil {
		t.Fatal(err)
	}
	if got.Buckets[1].Owner != "a" || got.Buckets[1].Claims != 3 || len(got.Buckets) != 4 {
		t.Fatalf("round trip: %+v", got)
	}
	total := 0
	for _, b := range got.Buckets {
		total += b.Namespaces
	}
	if total != 40 {
		t.Errorf("buckets count %d namespaces, want 40", total)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", "{", "unexpected end"},
		{"no buckets", `{"buckets":[]}`, "no buckets"},
		{"gap", `{"buckets":[{"start":"0x0000000000000000","end":"0x1000000000000000"},{"start":"0x2000000000000000","end":"0x10000000000000000"}]}`, "cover the hash space"},
		{"short end", `{"buckets":[{"start":"0x0000000000000000","end":"0x8000000000000000"}]}`, "must end at"},
		{"bad hex", `{"buckets":[{"start":"0x0","end":"0x10000000000000000"}]}`, "16 hex digits"},
		{"two releases", `{"buckets":[{"start":"0x0000000000000000","end":"0x8000000000000000","owner":"a","releasingTo":"b"},{"start":"0x8000000000000000","end":"0x10000000000000000","owner":"a","releasingTo":"b"}]}`, "at most one"},
		{"release without owner", `{"buckets":[{"start":"0x0000000000000000","end":"0x10000000000000000","releasingTo":"b"}]}`, "by no owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &v1.ConfigMap{Data: map[string]string{RingKey: tc.data}}
			if _, err := DecodeRing(cm); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeRing = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := DecodeRing(&v1.ConfigMap{}); err == nil {
		t.Error("a ConfigMap without the key decoded")
	}
}
