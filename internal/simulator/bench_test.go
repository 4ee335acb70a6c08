package simulator

import (
	"fmt"
	"testing"
)

// BenchmarkSimulate: `rollout plan`'s cost, an image change of a fully
// rolled-out Deployment (25%/25%) at 100 and 1,000 replicas, both
// controllers' syncs included.
//
//	go test -run='^$' -bench=Simulate -benchmem ./internal/simulator
func BenchmarkSimulate(b *testing.B) {
	for _, n := range []int32{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			surge, unavailable := pct25()
			d := newDeployment(n, surge, unavailable)
			for b.Loop() {
				if p := simulateImageChange(b, d, d.Annotations, Config{}); !p.Complete {
					b.Fatalf("plan not complete: %s", p.Stopped)
				}
			}
		})
	}
}
