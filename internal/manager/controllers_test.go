package manager

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubedeploy/kubedeploy/deploy"
)

// TestTableIsTheControllerList: KnownControllers is the table's names, sorted and distinct, and every entry
// says how it is built, how many workers it runs and where its RBAC is.
func TestTableIsTheControllerList(t *testing.T) {
	var names []string
	for _, c := range controllerTable {
		names = append(names, c.Name)
		if c.New == nil || c.Workers == nil || c.RBAC.File == "" || c.RBAC.ClusterRole == "" || len(c.Informers) == 0 {
			t.Errorf("table entry %q is incomplete: %+v", c.Name, c)
		}
		for _, o := range c.OptionalInformers {
			if o.Readable == nil {
				t.Errorf("%s: optional informer %v has no Readable", c.Name, o.Resource)
			}
		}
	}
	if !sort.StringsAreSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("table names %v: want sorted and distinct", names)
	}
	if !slices.Equal(KnownControllers, names) {
		t.Errorf("KnownControllers = %v, want the table's %v", KnownControllers, names)
	}
	var c Config
	c.Default()
	c.ConcurrentDeploymentSyncs, c.ConcurrentReplicaSetSyncs = 3, 7
	for name, want := range map[string]int{DeploymentController: 3, ReplicaSetController: 7} {
		if e, ok := lookupController(name); !ok || e.Workers(c) != want {
			t.Errorf("%s workers: want %d (its --concurrent-*-syncs flag)", name, want)
		}
	}
}

// TestTableRBAC: each controller's ClusterRole is in the deploy/ file its entry names (one `kubedeploy up`
// applies), and allows list and watch on every informer the entry declares, optional ones too, and creating
// events (each controller records its own).
func TestTableRBAC(t *testing.T) {
	for _, c := range controllerTable {
		if !slices.Contains(deploy.Files(), c.RBAC.File) {
			t.Errorf("%s: deploy/%s is not one of the embedded manifests %v", c.Name, c.RBAC.File, deploy.Files())
			continue
		}
		role := clusterRoleIn(t, filepath.Join("..", "..", "deploy", c.RBAC.File), c.RBAC.ClusterRole)
		if role == nil {
			t.Errorf("%s: no ClusterRole %s in deploy/%s", c.Name, c.RBAC.ClusterRole, c.RBAC.File)
			continue
		}
		resources := slices.Clone(c.Informers)
		for _, o := range c.OptionalInformers {
			resources = append(resources, o.Resource)
		}
		for _, r := range resources {
			for _, verb := range []string{"list", "watch"} {
				if !allows(role, r, verb) {
					t.Errorf("%s: ClusterRole %s does not allow %s on %v, an informer of the table's entry", c.Name, role.Name, verb, r)
				}
			}
		}
		if !allows(role, schema.GroupResource{Resource: "events"}, "create") {
			t.Errorf("%s: ClusterRole %s does not allow creating events", c.Name, role.Name)
		}
	}
}

// clusterRoleIn returns the ClusterRole named name in the manifest at path, or nil.
func clusterRoleIn(t *testing.T, path, name string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			continue // a comment-only document
		}
		if role, ok := obj.(*rbacv1.ClusterRole); ok && role.Name == name {
			return role
		}
	}
}

// allows reports whether a rule of role grants verb on r (no wildcards: deploy's TestNoWildcards).
func allows(role *rbacv1.ClusterRole, r schema.GroupResource, verb string) bool {
	return slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool {
		return slices.Contains(rule.APIGroups, r.Group) && slices.Contains(rule.Resources, r.Resource) && slices.Contains(rule.Verbs, verb)
	})
}

// TestDocsListTheTable: the documented --controllers default of `kubedeploy controllers` and `kubedeploy up`
// (their flags tables) is every controller of the table, so adding one without documenting it fails here.
func TestDocsListTheTable(t *testing.T) {
	want := "`" + strings.Join(KnownControllers, ",") + "`"
	for _, doc := range []string{"real-clusters.md", "local-cluster.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 4 || strings.TrimSpace(cells[1]) != "`--controllers`" {
				continue
			}
			found = true
			if got := strings.TrimSpace(cells[2]); got != want {
				t.Errorf("docs/%s documents --controllers default %s, want the table's %s", doc, got, want)
			}
		}
		if !found {
			t.Errorf("docs/%s has no --controllers row in a flags table", doc)
		}
	}
}
