package controlplane

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Issue 26: with zones > 1 the fake nodes are labelled round-robin with the well-known topology labels; with
// 1 (the default) they carry none.
func TestFakeNodesZones(t *testing.T) {
	var got []string
	for i := range 6 {
		n := fakeNode(i, 3)
		got = append(got, n.Labels[ZoneLabel])
		if n.Labels[RegionLabel] != RegionName {
			t.Errorf("node %d region %q, want %q", i, n.Labels[RegionLabel], RegionName)
		}
	}
	if want := []string{"zone-a", "zone-b", "zone-c", "zone-a", "zone-b", "zone-c"}; !slices.Equal(got, want) {
		t.Errorf("zones %v, want %v", got, want)
	}
	n := fakeNode(4, 1)
	if _, ok := n.Labels[ZoneLabel]; ok {
		t.Errorf("one zone: labels %v, want no zone label", n.Labels)
	}
}

// A data dir started before with other zones gets its nodes relabelled: zones added, moved, or removed.
func TestEnsureNodesRelabelsZones(t *testing.T) {
	ctx := context.Background()
	old := fakeNode(0, 1) // no zone
	moved := fakeNode(1, 3)
	moved.Labels[ZoneLabel] = "zone-c"
	client := fake.NewClientset(old, moved)
	if err := ensureNodes(ctx, client, 3, 2); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kwok-node-0": "zone-a", "kwok-node-1": "zone-b", "kwok-node-2": "zone-a"}
	for name, zone := range want {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[ZoneLabel] != zone || n.Labels[RegionLabel] != RegionName || n.Labels[NodeLabelType] != NodeLabelValue {
			t.Errorf("%s labels %v, want zone %s in %s", name, n.Labels, zone, RegionName)
		}
	}
	if err := ensureNodes(ctx, client, 3, 1); err != nil {
		t.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, ok := n.Labels[ZoneLabel]; ok {
			t.Errorf("back to one zone: %s still labelled %v", n.Name, n.Labels)
		}
		if _, ok := n.Labels[RegionLabel]; ok {
			t.Errorf("back to one zone: %s still labelled %v", n.Name, n.Labels)
		}
	}
}

func TestValidateZones(t *testing.T) {
	for _, c := range []struct {
		nodes, zones int
		ok           bool
	}{{6, 3, true}, {3, 1, true}, {3, 0, true}, {2, 3, false}, {30, 27, false}, {3, -1, false}} {
		cfg := Config{DataDir: "/tmp/x", Nodes: c.nodes, Zones: c.zones}
		cfg.Default()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("nodes %d zones %d: err %v, want ok %v", c.nodes, c.zones, err, c.ok)
		}
	}
}
