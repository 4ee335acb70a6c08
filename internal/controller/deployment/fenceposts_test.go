package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

func TestFencepostsRU7(t *testing.T) {
	pct := intstr.FromString
	for _, tc := range []struct {
		name                   string
		replicas               int32
		surge, unavailable     intstr.IntOrString
		wantSurge, wantUnavail int32
		wantMinAvail           int32
	}{
		{"RU-7 replicas 1", 1, pct("25%"), pct("25%"), 1, 0, 1},
		{"RU-7 replicas 3", 3, pct("25%"), pct("25%"), 1, 0, 3},
		{"RU-7 replicas 4", 4, pct("25%"), pct("25%"), 1, 1, 3},
		{"RU-7 replicas 10", 10, pct("25%"), pct("25%"), 3, 2, 8},
		{"RU-7 replicas 100", 100, pct("25%"), pct("25%"), 25, 25, 75},
		{"RU-7 surge 0 unavailable 1% forced to 1", 10, intstr.FromInt32(0), pct("1%"), 0, 1, 9},
		{"RU-3 replicas 1 surge 0 unavailable 25%", 1, intstr.FromInt32(0), pct("25%"), 0, 1, 0},
		{"RU-4 capped at replicas", 2, intstr.FromInt32(0), intstr.FromInt32(5), 0, 2, 0},
		{"RU-4 zero replicas", 0, intstr.FromInt32(2), intstr.FromInt32(2), 2, 0, 0},
		{"RU-5 int surge stays at 0 replicas", 0, intstr.FromInt32(3), pct("25%"), 3, 0, 0},
		{"invalid values treated as 0", 10, pct("abc"), pct("x"), 0, 1, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(tc.replicas, tc.surge, tc.unavailable)
			if got := fencepostsFor(d).MaxSurge; got != tc.wantSurge {
				t.Errorf("maxSurge = %d, want %d", got, tc.wantSurge)
			}
			if got := fencepostsFor(d).MaxUnavailable; got != tc.wantUnavail {
				t.Errorf("maxUnavailable = %d, want %d", got, tc.wantUnavail)
			}
			if got := fencepostsFor(d).MinAvailable(); got != tc.wantMinAvail {
				t.Errorf("minAvailable = %d, want %d", got, tc.wantMinAvail)
			}
		})
	}
	t.Run("Recreate has no rolloutstate.Fenceposts", func(t *testing.T) {
		d := newRecreateDeployment(10)
		if f := fencepostsFor(d); f.MaxSurge != 0 || f.MaxUnavailable != 0 || f.MinAvailable() != 10 {
			t.Errorf("got surge %d, unavailable %d, minAvailable %d; want 0, 0, 10 (RC-9)", f.MaxSurge, f.MaxUnavailable, f.MinAvailable())
		}
	})
	t.Run("nil rollingUpdate and nil replicas do not crash", func(t *testing.T) {
		d := newDeployment(10, pct("25%"), pct("25%"))
		d.Spec.Strategy.RollingUpdate = nil
		d.Spec.Replicas = nil
		if f := fencepostsFor(d); f.MaxSurge != 0 || f.MaxUnavailable != 1 || f.Replicas != 1 {
			t.Errorf("got surge %d unavailable %d replicas %d", f.MaxSurge, f.MaxUnavailable, f.Replicas)
		}
	})
	t.Run("an invalid value is an error, counted as 0", func(t *testing.T) {
		f, err := rolloutstate.FencepostsOf(newDeployment(10, pct("abc"), pct("25%")))
		if err == nil || f.MaxSurge != 0 || f.MaxUnavailable != 2 {
			t.Errorf("got %+v, %v; want surge 0, unavailable 2 and an error", f, err)
		}
	})
}

func TestNewRSNewReplicasRU10(t *testing.T) {
	d := newDeployment(10, intstr.FromString("25%"), intstr.FromString("25%"))
	for _, tc := range []struct {
		name string
		rss  func() ([]*appsv1.ReplicaSet, *appsv1.ReplicaSet)
		want int32
	}{
		{"RU-16 sync 1: new RS starts at 3", func() ([]*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
			return []*appsv1.ReplicaSet{newRS(d, "a", "old", 10, 0, nil)}, nil
		}, 3},
		{"RU-16 sync 2: 3 -> 5", func() ([]*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
			b := newRS(d, "b", "new", 3, 1, nil)
			return []*appsv1.ReplicaSet{newRS(d, "a", "old", 8, 0, nil), b}, b
		}, 5},
		{"at max total keeps size", func() ([]*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
			b := newRS(d, "b", "new", 5, 1, nil)
			return []*appsv1.ReplicaSet{newRS(d, "a", "old", 8, 0, nil), b}, b
		}, 5},
		{"zero-size old RSs count", func() ([]*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
			b := newRS(d, "b", "new", 0, 1, nil)
			return []*appsv1.ReplicaSet{newRS(d, "z", "older", 0, 0, nil), b}, b
		}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, nrs := tc.rss()
			got, err := newRSNewReplicas(d, fencepostsFor(d), all, nrs)
			if err != nil || got != tc.want {
				t.Errorf("newRSNewReplicas = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	t.Run("Recreate returns replicas", func(t *testing.T) {
		r := d.DeepCopy()
		r.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		if got, err := newRSNewReplicas(r, fencepostsFor(r), []*appsv1.ReplicaSet{newRS(d, "a", "x", 10, 0, nil)}, nil); got != 10 || err != nil {
			t.Errorf("got %d, %v", got, err)
		}
	})
	t.Run("unknown strategy is an error", func(t *testing.T) {
		r := d.DeepCopy()
		r.Spec.Strategy.Type = "Bogus"
		if _, err := newRSNewReplicas(r, fencepostsFor(r), nil, nil); err == nil || !strings.Contains(err.Error(), "unexpected deployment strategy type: Bogus") {
			t.Errorf("err = %v", err)
		}
	})
}

// The bounds (rolloutstate.Fenceposts' MaxTotal and MinAvailable) are the
// lines `rollout watch --timeline` draws: the seed's 20
// replicas at 25%/25% may have 25 pods and must keep 15 available; Recreate
// has no surge; a bad maxSurge is reported and counts as 0 (VA-8).
func TestBounds(t *testing.T) {
	pct := intstr.FromString
	for _, tc := range []struct {
		d                      *appsv1.Deployment
		maxTotal, minAvailable int32
		err                    bool
	}{
		{newDeployment(20, pct("25%"), pct("25%")), 25, 15, false},
		{newDeployment(3, intstr.FromInt32(0), intstr.FromInt32(1)), 3, 2, false},
		{newRecreateDeployment(4), 4, 4, false},
		{newDeployment(10, pct("abc"), pct("20%")), 10, 8, true},
	} {
		f, err := rolloutstate.FencepostsOf(tc.d)
		if maxTotal, minAvailable := f.MaxTotal(), f.MinAvailable(); maxTotal != tc.maxTotal || minAvailable != tc.minAvailable || (err != nil) != tc.err {
			t.Errorf("%s: bounds = %d, %d, %v; want %d, %d, error %v", tc.d.Spec.Strategy.Type, maxTotal, minAvailable, err, tc.maxTotal, tc.minAvailable, tc.err)
		}
	}
}
