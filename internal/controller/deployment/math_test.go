package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestComputeHashOM19 checks the OM-19 vectors (and OM-17: nil ≠ 0).
func TestComputeHashOM19(t *testing.T) {
	tmpl := podTemplate("nginx:1.14.2")
	for _, tc := range []struct {
		name  string
		count *int32
		want  string
	}{
		{"OM-19 collisionCount nil", nil, "5d76467944"},
		{"OM-19 collisionCount 0", ptr.To[int32](0), "6784bcb86d"},
		{"OM-19 collisionCount 1", ptr.To[int32](1), "7f4c77ddb5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := computeHash(&tmpl, tc.count); got != tc.want {
				t.Errorf("computeHash = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRenderHashOM18 checks the digit map of OM-18.
func TestRenderHashOM18(t *testing.T) {
	for _, tc := range []struct {
		name string
		sum  uint32
		want string
	}{
		{"OM-18 example", 1832023500, "5d76467944"},
		{"OM-19 count 0", 2340676428, "6784bcb86d"},
		{"OM-19 count 1", 3907338861, "7f4c77ddb5"},
		{"all digits", 1234567890, "56789bcdf4"},
		{"zero", 0, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderHash(tc.sum); got != tc.want {
				t.Errorf("renderHash(%d) = %q, want %q", tc.sum, got, tc.want)
			}
		})
	}
}

func TestReplicaSetNameOM21(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name, d, hash, want string
	}{
		{"short kept", "nginx", "5d76467944", "nginx-5d76467944"},
		{"242 kept", strings.Repeat("b", 242), "5d76467944", strings.Repeat("b", 242) + "-5d76467944"},
		{"longer cut to 242", long, "5d76467944", long[:242] + "-5d76467944"},
		{"no trim of trailing dash", strings.Repeat("c", 241) + "-x", "5d76467944", strings.Repeat("c", 241) + "--5d76467944"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replicaSetName(tc.d, tc.hash)
			if got != tc.want {
				t.Errorf("replicaSetName = %q, want %q", got, tc.want)
			}
			if len(got) > 253 {
				t.Errorf("name has %d chars", len(got))
			}
		})
	}
}

func TestTemplatesEqualIgnoringHashRV1(t *testing.T) {
	a := podTemplate("nginx:1")
	b := podTemplate("nginx:1")
	b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("hash label must be ignored")
	}
	b.Annotations = map[string]string{}
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("nil and empty maps must be equal")
	}
	a.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1")}
	b.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": resource.MustParse("1000m")}
	if !templatesEqualIgnoringHash(&a, &b) {
		t.Error("quantities must compare numerically")
	}
	c := podTemplate("nginx:2")
	if templatesEqualIgnoringHash(&a, &c) {
		t.Error("different images must differ")
	}
	if _, ok := a.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("inputs must not be modified")
	}
	if b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Error("inputs must not be modified")
	}
}

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
			if got := fencepostsFor(d).maxSurge; got != tc.wantSurge {
				t.Errorf("maxSurge = %d, want %d", got, tc.wantSurge)
			}
			if got := fencepostsFor(d).maxUnavailable; got != tc.wantUnavail {
				t.Errorf("maxUnavailable = %d, want %d", got, tc.wantUnavail)
			}
			if got := fencepostsFor(d).minAvailable(); got != tc.wantMinAvail {
				t.Errorf("minAvailable = %d, want %d", got, tc.wantMinAvail)
			}
		})
	}
	t.Run("Recreate has no fenceposts", func(t *testing.T) {
		d := newDeployment(10, pct("25%"), pct("25%"))
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		if f := fencepostsFor(d); f.maxSurge != 0 || f.maxUnavailable != 0 || f.minAvailable() != 10 {
			t.Errorf("got surge %d, unavailable %d, minAvailable %d; want 0, 0, 10 (RC-9)", f.maxSurge, f.maxUnavailable, f.minAvailable())
		}
	})
	t.Run("nil rollingUpdate and nil replicas do not crash", func(t *testing.T) {
		d := newDeployment(10, pct("25%"), pct("25%"))
		d.Spec.Strategy.RollingUpdate = nil
		d.Spec.Replicas = nil
		if f := fencepostsFor(d); f.maxSurge != 0 || f.maxUnavailable != 1 || f.replicas != 1 {
			t.Errorf("got surge %d unavailable %d replicas %d", f.maxSurge, f.maxUnavailable, f.replicas)
		}
	})
	t.Run("an invalid value is an error, counted as 0", func(t *testing.T) {
		f, err := fencepostsOf(newDeployment(10, pct("abc"), pct("25%")))
		if err == nil || f.maxSurge != 0 || f.maxUnavailable != 2 {
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

func TestRevisionHistoryRV6(t *testing.T) {
	long := strings.Repeat("9", 999)
	for _, tc := range []struct {
		name, history, old string
		maxLen             int
		want               string
	}{
		{"RV-6 empty history", "", "3", 2000, "3"},
		{"RV-6 append", "1,2", "3", 2000, "1,2,3"},
		{"RV-6 exactly fits", "12", "34", 5, "12,34"},
		{"RV-6 drops oldest until it fits", "1,2,3", "4", 5, "2,3,4"},
		{"RV-6 drops several", long + "," + long, "5", 2000, long + ",5"},
		{"RV-6 unchanged when old alone is too long", "1", "123456", 5, "1"},
		{"RV-6 all dropped, old fits", "12345", "6", 5, "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appendRevisionHistory(tc.history, tc.old, tc.maxLen); got != tc.want {
				t.Errorf("appendRevisionHistory(%q, %q) = %q, want %q", tc.history, tc.old, got, tc.want)
			}
		})
	}
}

func TestRevisions(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	rev := func(v string) *appsv1.ReplicaSet {
		return newRS(d, "rs"+v, "x", 0, 0, map[string]string{RevisionAnnotation: v})
	}
	for _, tc := range []struct {
		name              string
		rss               []*appsv1.ReplicaSet
		wantMax, wantLast int64
	}{
		{"none", nil, 0, 0},
		{"missing is 0", []*appsv1.ReplicaSet{newRS(d, "a", "x", 0, 0, nil)}, 0, 0},
		{"OM-1 int64", []*appsv1.ReplicaSet{rev("3546343826724305832")}, 3546343826724305832, 0},
		{"unparseable skipped", []*appsv1.ReplicaSet{rev("x"), rev("2"), rev("5")}, 5, 2},
		{"RB-3 tie on highest", []*appsv1.ReplicaSet{rev("4"), rev("4"), rev("1")}, 4, 4},
		{"RB-3 second highest", []*appsv1.ReplicaSet{rev("1"), rev("7"), rev("3")}, 7, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxRevision(tc.rss); got != tc.wantMax {
				t.Errorf("maxRevision = %d, want %d", got, tc.wantMax)
			}
			if got := lastRevision(tc.rss); got != tc.wantLast {
				t.Errorf("lastRevision = %d, want %d", got, tc.wantLast)
			}
		})
	}
}

func TestAnnotationCopyOM8(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		lastAppliedConfigAnnotation: "{}", RevisionAnnotation: "9", RevisionHistoryAnnotation: "1",
		DesiredReplicasAnnotation: "5", MaxReplicasAnnotation: "6", RollbackToAnnotation: "0",
		"kubernetes.io/change-cause": "v2", "custom": "x",
	}
	rs := newRS(d, "a", "x", 1, 0, map[string]string{"custom": "x", "rs-only": "keep", RevisionAnnotation: "2"})
	if !copyDeploymentAnnotations(d, rs) {
		t.Fatal("expected a change")
	}
	want := map[string]string{"custom": "x", "rs-only": "keep", RevisionAnnotation: "2", "kubernetes.io/change-cause": "v2"}
	if len(rs.Annotations) != len(want) {
		t.Fatalf("annotations = %v, want %v", rs.Annotations, want)
	}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if copyDeploymentAnnotations(d, rs) {
		t.Error("second copy must report no change")
	}
	t.Run("RB-6 rollback annotations", func(t *testing.T) {
		got := rollbackAnnotations(d, rs)
		for _, k := range []string{lastAppliedConfigAnnotation, RevisionAnnotation, RollbackToAnnotation} {
			if got[k] != d.Annotations[k] {
				t.Errorf("skip-listed %s = %q, want the deployment's %q", k, got[k], d.Annotations[k])
			}
		}
		if got["rs-only"] != "keep" || got["kubernetes.io/change-cause"] != "v2" {
			t.Errorf("rs annotations not copied: %v", got)
		}
	})
}

func TestSetNewReplicaSetRevisionRV2(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		newRevision int64
		wantChanged bool
		wantRev     string
		wantHistory string
	}{
		{"missing revision set, no history", nil, 3, true, "3", ""},
		{"bumped appends history", map[string]string{RevisionAnnotation: "1"}, 4, true, "4", "1"},
		{"bumped appends to existing history", map[string]string{RevisionAnnotation: "2", RevisionHistoryAnnotation: "1"}, 4, true, "4", "1,2"},
		{"RV-7 never lowered", map[string]string{RevisionAnnotation: "9"}, 4, false, "9", ""},
		{"unparseable reports unchanged", map[string]string{RevisionAnnotation: "x"}, 4, false, "x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS(d, "a", "x", 1, 0, tc.annotations)
			if got := setNewReplicaSetRevision(d, rs, tc.newRevision); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			if rs.Annotations[RevisionAnnotation] != tc.wantRev || rs.Annotations[RevisionHistoryAnnotation] != tc.wantHistory {
				t.Errorf("revision %q history %q, want %q %q", rs.Annotations[RevisionAnnotation], rs.Annotations[RevisionHistoryAnnotation], tc.wantRev, tc.wantHistory)
			}
		})
	}
}

func TestReplicasAnnotationOM3(t *testing.T) {
	d := newDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	for _, tc := range []struct {
		name   string
		value  *string
		want   int32
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"ok", ptr.To("10"), 10, true},
		{"zero parses", ptr.To("0"), 0, true},
		{"negative", ptr.To("-1"), 0, false},
		{"above MaxInt32", ptr.To("2147483648"), 0, false},
		{"MaxInt32", ptr.To("2147483647"), 2147483647, true},
		{"garbage", ptr.To("ten"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS(d, "a", "x", 1, 0, nil)
			if tc.value != nil {
				rs.Annotations = map[string]string{DesiredReplicasAnnotation: *tc.value}
			}
			got, ok := replicasAnnotation(rs, DesiredReplicasAnnotation)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %d,%v want %d,%v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
