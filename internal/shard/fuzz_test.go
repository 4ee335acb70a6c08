package shard

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// FuzzRing: whatever a ConfigMap holds, DecodeRing returns an error or a ring that covers the whole hash space
// (every namespace found in exactly one bucket), and Next on it never panics and names a bucket of the ring.
func FuzzRing(f *testing.F) {
	good := EncodeRing(nil, "ns", DefaultRingName, NewRing(Bounds(sequential("ns-%d", 10, 3), 4), nil)).Data[RingKey]
	f.Add(good, "ns-1", "a,b")
	f.Add(`{"buckets":[{"start":"0x0000000000000000","end":"0x10000000000000000","owner":"a","releasingTo":"b"}]}`, "x", "a")
	f.Add(`{"buckets":[]}`, "", "")
	f.Fuzz(func(t *testing.T, data, namespace, live string) {
		ring, err := DecodeRing(&v1.ConfigMap{Data: map[string]string{RingKey: data}})
		if err != nil {
			return
		}
		if i := ring.Find(namespace); i < 0 || !ring.Buckets[i].Range().Contains(namespace) {
			t.Fatalf("ring does not hold %q: bucket %d", namespace, i)
		}
		if last := ring.Buckets[len(ring.Buckets)-1].Range().Last; last != math.MaxUint64 {
			t.Fatalf("last bucket ends at %#x", last)
		}
		var ids []string
		for i := 0; i+1 <= len(live); i += 2 {
			ids = append(ids, live[i:i+1])
		}
		if m := Next(ring, ids, time.Unix(1e9, 0)); m.Kind != NoMove && (m.Bucket < 0 || m.Bucket >= len(ring.Buckets)) {
			t.Fatalf("Next = %+v for a ring of %d buckets", m, len(ring.Buckets))
		}
	})
}
