package manager

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// TestUnsupportedFieldsSeveralSets: with the template stores of two controller sets over disjoint namespaces in
// use, one scrape has both sets' Deployments; stopping one set's store removes its series only, and stopping it
// again changes nothing. A series two stores both have is sent once.
func TestUnsupportedFieldsSeveralSets(t *testing.T) {
	c := &unsupportedFieldsCollector{}
	stopA := c.use(storeWithUnsupported(t, "team-a"))
	stopB := c.use(storeWithUnsupported(t, "team-b"))
	series := func(namespaces ...string) string {
		if len(namespaces) == 0 {
			return ""
		}
		out := "# HELP kubedeploy_deployment_unsupported_fields [ALPHA] Deployments kubedeploy does not manage because their spec has a " +
			"field outside the pod template that its compiled API does not know (1 per namespace, deployment and field); event " +
			"UnsupportedDeploymentField.\n# TYPE kubedeploy_deployment_unsupported_fields gauge\n"
		for _, ns := range namespaces {
			out += `kubedeploy_deployment_unsupported_fields{deployment="web",field="spec.futureField",namespace="` + ns + `"} 1` + "\n"
		}
		return out
	}
	var stopOverlap func()
	for _, step := range []struct {
		name string
		stop func()
		want string
	}{
		{"both in use", func() {}, series("team-a", "team-b")},
		{"a third over team-a too", func() { stopOverlap = c.use(storeWithUnsupported(t, "team-a")) }, series("team-a", "team-b")},
		{"the third stopped", func() { stopOverlap() }, series("team-a", "team-b")},
		{"team-a's stopped", stopA, series("team-b")},
		{"team-a's stopped again", stopA, series("team-b")},
		{"both stopped", stopB, series()},
	} {
		step.stop()
		// A collector registers once; each comparison registers one of its own, over the same stores.
		fresh := &unsupportedFieldsCollector{}
		for _, store := range c.stores.All() {
			fresh.use(store)
		}
		if err := testutil.CustomCollectAndCompare(fresh, strings.NewReader(step.want), "kubedeploy_deployment_unsupported_fields"); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
}

// storeWithUnsupported returns a template store that has seen Deployment web in namespace with the unknown field
// spec.futureField.
func storeWithUnsupported(t *testing.T, namespace string) *rawtemplate.Store {
	t.Helper()
	s := rawtemplate.NewStore(klog.Background(), nil)
	_, err := s.Note(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": namespace, "name": "web", "uid": namespace + "-web", "generation": int64(1)},
		"spec": map[string]any{
			"futureField": true,
			"selector":    map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
			},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
