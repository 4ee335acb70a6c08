package rollout

import (
	"os"
	"path/filepath"
	"testing"
)

// -f reads as kubectl does (cli-runtime's builder): several documents, a
// List unpacked, a directory by its files, in the order given; a comment-
// only document is nothing.
func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deploy := func(name string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + "}\n"
	}
	first := write("first.yaml", deploy("a")+"---\n# only a comment\n---\n"+deploy("b"))
	list := write("list.yaml", `apiVersion: v1
kind: List
items:
- {apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: a-1}}
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: c}}
`)
	write("more/d.json", `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}`)
	m, err := readManifests([]string{first, list, filepath.Join(dir, "more")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range m.deployments {
		names = append(names, d.obj.GetName())
	}
	if len(names) != 4 || names[0] != "a" || names[1] != "b" || names[2] != "c" || names[3] != "d" {
		t.Errorf("Deployments %v, want a b c d", names)
	}
	if len(m.replicaSets) != 1 || m.replicaSets[0].obj.GetName() != "a-1" || m.replicaSets[0].source != list {
		t.Errorf("ReplicaSets %+v", m.replicaSets)
	}
	if _, err := m.pick(""); err == nil {
		t.Errorf("pick among several Deployments: no error")
	}
	if ds, err := m.pick("c"); err != nil || len(ds) != 1 {
		t.Errorf("pick c: %v, %v", ds, err)
	}
	if m, err := readManifests(nil); err != nil || len(m.deployments)+len(m.replicaSets) != 0 {
		t.Errorf("no -f: %+v, %v", m, err)
	}
}
