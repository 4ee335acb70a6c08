package simulator

import (
	"fmt"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// FuzzPartition: for any replicas, maxSurge, maxUnavailable and partition
// (pods or percent), the simulated rollout (the controllers' own syncs, EX-1)
// never puts more pods on the new template than the partition allows, keeps
// within replicas + maxSurge pods and replicas − maxUnavailable available at
// every step, and ends held with the new ReplicaSet at exactly the partition
// (or complete when the partition is at or above replicas).
func FuzzPartition(f *testing.F) {
	f.Add(int32(20), int32(5), int32(5), false, int32(5), false, false)
	f.Add(int32(20), int32(25), int32(25), true, int32(50), true, false)
	f.Add(int32(3), int32(0), int32(1), false, int32(1), false, false)
	f.Add(int32(10), int32(0), int32(0), false, int32(0), false, true)
	f.Add(int32(7), int32(100), int32(0), true, int32(99), true, false)
	f.Fuzz(func(t *testing.T, replicas, surgeV, unavailableV int32, percent bool, partitionV int32, partitionPercent, minReady bool) {
		replicas = bounded(replicas, 40)
		surge := fuzzFencepost(percent, surgeV, replicas)
		unavailable := fuzzFencepost(percent, unavailableV, replicas)
		d := newDeployment(replicas, surge, unavailable)
		if minReady {
			d.Spec.MinReadySeconds = 2
		}
		value := fmt.Sprint(bounded(partitionV, replicas+5))
		if partitionPercent {
			value = fmt.Sprintf("%d%%", bounded(partitionV, 120))
		}
		limit, err := rolloutstate.ParsePartition(value, replicas)
		if err != nil {
			t.Fatal(err)
		}
		p := partitionedPlan(t, d, value)
		maxSurge, maxUnavailable, err := rolloutstate.ResolveFenceposts(&surge, &unavailable, replicas)
		if err != nil {
			t.Fatal(err)
		}
		if replicas > 0 && maxUnavailable > replicas {
			maxUnavailable = replicas
		}
		for i, s := range p.Steps {
			if s.NewReplicas > limit {
				t.Fatalf("step %d: new ReplicaSet at %d, partition %q allows %d (%+v)", i, s.NewReplicas, value, limit, p.Steps)
			}
			if s.MaxTotal > replicas+maxSurge {
				t.Fatalf("step %d: %d pods, bound %d (%+v)", i, s.MaxTotal, replicas+maxSurge, p.Steps)
			}
			if s.MinAvailable < replicas-maxUnavailable {
				t.Fatalf("step %d: %d available, bound %d (%+v)", i, s.MinAvailable, replicas-maxUnavailable, p.Steps)
			}
		}
		switch {
		case limit >= replicas:
			if !p.Complete {
				t.Fatalf("partition %q of %d replicas: want complete, %s", value, replicas, p.Stopped)
			}
		case !p.Partitioned:
			t.Fatalf("partition %q (%d) of %d replicas: want held, complete %v, %s (%+v)", value, limit, replicas, p.Complete, p.Stopped, p.Steps)
		case len(p.Steps) == 0:
			t.Fatalf("partition %q: held without a step", value)
		default:
			last := p.Steps[len(p.Steps)-1]
			if last.NewReplicas != limit || sum(last.OldReplicas) != replicas-limit {
				t.Fatalf("held at new %d, old %v; want %d and %d", last.NewReplicas, last.OldReplicas, limit, replicas-limit)
			}
		}
	})
}

// bounded maps any fuzzed int32 onto [0, limit].
func bounded(v, limit int32) int32 { return int32(uint32(v) % uint32(limit+1)) }

// fuzzFencepost is an int-or-percent from fuzzed primitives: "N%" when
// percent, else the int N, with N bounded to [0, limit].
func fuzzFencepost(percent bool, v, limit int32) intstr.IntOrString {
	n := bounded(v, limit)
	if percent {
		return intstr.FromString(strconv.Itoa(int(n)) + "%")
	}
	return intstr.FromInt32(n)
}

func sum(v []int32) int32 {
	var n int32
	for _, x := range v {
		n += x
	}
	return n
}
