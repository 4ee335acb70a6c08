package manager

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// rolloutPhase is a namespace's Deployment "web" of 4 replicas, maxSurge 2, at one moment of a rollout: the
// old and the new ReplicaSet's replicas and pods.
type rolloutPhase struct {
	name     string
	old, new int32
}

var rolloutPhases = []rolloutPhase{{"before", 4, 0}, {"surged", 4, 2}, {"halfway", 2, 4}, {"done", 0, 4}}

// addRollout adds to ix, in namespace ns, Deployment web at phase p: its two ReplicaSets and their pods, a
// ReplicaSet of its own with 2 replicas and 2 pods, a StatefulSet's pod and a bare pod.
func addRollout(t *testing.T, ix steadyIndexers, ns string, p rolloutPhase) {
	t.Helper()
	ctrl := func(kind, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: uid, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	meta := func(name, owner, kind string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}
		if owner != "" {
			m.OwnerReferences = ctrl(kind, owner)
		}
		return m
	}
	objs := []struct {
		idx cache.Indexer
		obj any
	}{
		{ix.deployments, &appsv1.Deployment{ObjectMeta: meta("web", "", ""), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}},
		{ix.replicaSets, &appsv1.ReplicaSet{ObjectMeta: meta("web-old", "web", "Deployment"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(p.old)}}},
		{ix.replicaSets, &appsv1.ReplicaSet{ObjectMeta: meta("web-new", "web", "Deployment"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(p.new)}}},
		{ix.replicaSets, &appsv1.ReplicaSet{ObjectMeta: meta("own", "", ""), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2)}}},
		{ix.pods, &v1.Pod{ObjectMeta: meta("db-0", "db", "StatefulSet")}},
		{ix.pods, &v1.Pod{ObjectMeta: meta("bare", "", "")}},
	}
	for rs, n := range map[string]int32{"web-old": p.old, "web-new": p.new, "own": 2} {
		for i := range n {
			objs = append(objs, struct {
				idx cache.Indexer
				obj any
			}{ix.pods, &v1.Pod{ObjectMeta: meta(fmt.Sprintf("%s-%d", rs, i), rs, "ReplicaSet")}})
		}
	}
	for _, o := range objs {
		if err := o.idx.Add(o.obj); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSteadyCountsIgnoreTheSurge is SH-8's weight from a real ControllerSet's caches (the informers its
// controllers read, filled by hand): at every phase of a rollout of a 4-replica Deployment (before, surged by
// 2, halfway, done) a namespace weighs 4 + 2 (its own ReplicaSet) + 1 (a StatefulSet's pod) + 1 (a bare pod)
// = 8, while its cached pods go from 8 to 10 and back; a namespace outside the bucket's range does not count.
func TestSteadyCountsIgnoreTheSurge(t *testing.T) {
	inside, outside := "", ""
	half := shard.Range{Start: 0, Last: 1<<63 - 1}
	for i := 0; inside == "" || outside == ""; i++ {
		if ns := fmt.Sprintf("team-%d", i); half.Contains(ns) && inside == "" {
			inside = ns
		} else if !half.Contains(ns) && outside == "" {
			outside = ns
		}
	}
	for _, p := range rolloutPhases {
		t.Run(p.name, func(t *testing.T) {
			set := newUnstartedSet(t)
			addRollout(t, set.steadyIndexers(), inside, p)
			addRollout(t, set.steadyIndexers(), outside, rolloutPhases[1])
			if pods, nss := steadyCounts(set.steadyIndexers(), half.Contains); pods != 8 || nss != 1 {
				t.Errorf("steady %d pods in %d namespaces, want 8 in 1 (cached pods: %d)", pods, nss, len(set.steadyIndexers().pods.List()))
			}
		})
	}
}

// newUnstartedSet builds a ControllerSet of every controller against a server that is never asked.
func newUnstartedSet(t *testing.T) *ControllerSet {
	t.Helper()
	cfg := Config{RESTConfig: &rest.Config{Host: unusedServerURL(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, Controllers: KnownControllers}
	cfg.Default()
	set, err := NewControllerSet(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.release)
	return set
}
