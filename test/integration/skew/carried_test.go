package skew

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// templateFutureFields are the pod template fields, unknown to kubedeploy's k8s.io/api, that the carried
// Deployment's JSON has: pod level, container level, and nested in a known struct (paths from the template).
var templateFutureFields = map[string]string{
	"spec.someFutureField":                    `{"mode":"strict"}`,
	"spec.containers[0].futureContainerField": `"sidecar-aware"`,
	"spec.securityContext.futureProfile":      `{"type":"RuntimeDefault"}`,
}

// futureDeployment is the JSON of a Deployment of 3 nginx:1 pods as a user of a newer cluster writes it: with the
// template's future fields, and, when specField is set, that field at the top of spec too.
func futureDeployment(ns, name, specField string) string {
	top := ""
	if specField != "" {
		top = fmt.Sprintf("%q: %q,", specField, "Exact")
	}
	return fmt.Sprintf(`{"apiVersion": "apps/v1", "kind": "Deployment",
	  "metadata": {"name": %[2]q, "namespace": %[1]q},
	  "spec": {%[3]s "replicas": 3, "selector": {"matchLabels": {"app": %[2]q}},
	    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
	    "template": {"metadata": {"labels": {"app": %[2]q}},
	      "spec": {"someFutureField": {"mode": "strict"},
	        "securityContext": {"futureProfile": {"type": "RuntimeDefault"}},
	        "containers": [{"name": "web", "image": "nginx:1", "futureContainerField": "sidecar-aware"}]}}}}`, ns, name, top)
}

// TestTemplatesCarriedThroughNewerServer (IM-8, issue 23): with kubedeploy's controllers talking to a
// futureServer (a "v1.37" API server keeping fields kubedeploy's v1.36 API does not know), through the real
// client-go decode paths (protobuf lists and watches whose messages carry fields kubedeploy has no number for, then
// JSON reads of those objects):
//   - the ReplicaSet created for a Deployment whose template has unknown fields carries its template exactly as
//     stored, compared as JSON, plus pod-template-hash; the pods carry the unknown fields;
//   - after the user removes them (revision 2), a rollback to revision 1 puts them back on the Deployment exactly
//     as that ReplicaSet stores them, revision 1's ReplicaSet is found as the new one again (no third ReplicaSet:
//     template equality counts unknown fields) and its new pods carry them;
//   - a Deployment with an unknown field at the top of spec is refused with the Warning event
//     UnsupportedDeploymentField naming it, kubedeploy_deployment_unsupported_fields, no ReplicaSet and no status
//     write, while the other Deployment proceeds;
//   - the server's version skew is exported.
func TestTemplatesCarriedThroughNewerServer(t *testing.T) {
	r := startFutureRun(t)
	fs, ns, ctx, dyn, deployments := r.fs, r.ns, r.ctx, r.dyn, r.deployments
	createFutureDeployments(ctx, t, deployments, ns)

	harness.WaitComplete(t, env.Client, ns, "carried", time.Minute)
	rs1 := onlyReplicaSet(ctx, t, ns, "carried", "")
	checkTemplateCarried(ctx, t, fs, dyn, ns, "carried", rs1)
	checkPodsCarry(ctx, t, fs, ns, rs1)

	// Revision 2: the user replaces the Deployment with one without the future fields (a PUT of JSON).
	checkRevisionWithoutFutureFields(ctx, t, fs, deployments, ns, rs1)

	// Rollback by annotation to revision 1 (RB-5).
	checkRollbackCarries(ctx, t, fs, dyn, ns, rs1)

	checkRefused(ctx, t, ns, "refused")
	checkMetrics(t, ns)

	// The informers listed and watched protobuf, as on a cluster of kubedeploy's own version, and read as JSON only
	// the objects whose protobuf carried fields they could not decode, one at a time.
	reads := fs.reads()
	t.Logf("shared informers' reads of Deployments and ReplicaSets: %v", reads)
	if reads["protobuf watch"]+reads["protobuf list"] == 0 || reads["json get"] == 0 || reads["json list"]+reads["json watch"] > 0 {
		t.Errorf("shared informers' reads %v: want protobuf lists or watches, JSON gets of single objects, no JSON list or watch", reads)
	}
}

// createFutureDeployments creates, through deployments (of ns), Deployment
// "carried" with the template's future fields and Deployment "refused" with
// someFutureField at the top of spec too.
func createFutureDeployments(ctx context.Context, t *testing.T, deployments dynamic.ResourceInterface, ns string) {
	t.Helper()
	for name, specField := range map[string]string{"carried": "", "refused": "someFutureField"} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(futureDeployment(ns, name, specField))); err != nil {
			t.Fatal(err)
		}
		if _, err := deployments.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
}

// checkRevisionWithoutFutureFields replaces Deployment ns/carried with one
// without the future fields and image nginx:2 (a PUT of JSON), waits for the
// rollout, and checks that the new ReplicaSet, the one other than rs1, has
// no unknown fields.
func checkRevisionWithoutFutureFields(ctx context.Context, t *testing.T, fs *futureServer, deployments dynamic.ResourceInterface, ns, rs1 string) {
	t.Helper()
	d, err := deployments.Get(ctx, "carried", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	delete(spec, "someFutureField")
	delete(spec, "securityContext")
	container := spec["containers"].([]any)[0].(map[string]any)
	delete(container, "futureContainerField")
	container["image"] = "nginx:2"
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, env.Client, ns, "carried", time.Minute)
	rs2 := onlyReplicaSet(ctx, t, ns, "carried", rs1)
	if got := fs.unknown("replicasets", ns, rs2); len(got) != 0 {
		t.Errorf("revision 2's ReplicaSet %s has unknown fields %v; its template has none", rs2, got)
	}
}

// checkRollbackCarries rolls Deployment ns/carried back to revision 1 by
// annotation and checks that the template and the new pods carry revision 1's
// future fields from rs1, found as the new ReplicaSet again (2 in all).
func checkRollbackCarries(ctx context.Context, t *testing.T, fs *futureServer, dyn dynamic.Interface, ns, rs1 string) {
	t.Helper()
	patch(ctx, t, ns, "carried", fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, rolloutstate.RollbackToAnnotation))
	waitFor(t, ns, "carried", "rolled back to nginx:1", func(d *appsv1.Deployment) bool {
		_, pending := d.Annotations[rolloutstate.RollbackToAnnotation]
		return !pending && image(d) == "nginx:1"
	})
	harness.WaitComplete(t, env.Client, ns, "carried", time.Minute)
	checkTemplateCarried(ctx, t, fs, dyn, ns, "carried", rs1)
	checkPodsCarry(ctx, t, fs, ns, rs1)
	rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=carried"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Errorf("after the rollback the Deployment has %d ReplicaSets, want 2 (revision 1's found as the new one again)", len(rss.Items))
	}
}

// onlyReplicaSet returns the name of the one ReplicaSet of Deployment ns/name other than except with replicas.
func onlyReplicaSet(ctx context.Context, t *testing.T, ns, name, except string) string {
	t.Helper()
	rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": name}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, rs := range rss.Items {
		if rs.Name != except && rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0 {
			found = append(found, rs.Name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("ReplicaSets of %s/%s with replicas (besides %q): %v, want one", ns, name, except, found)
	}
	return found[0]
}

// checkTemplateCarried: as the newer server serves them, ReplicaSet rs's pod template is Deployment name's exactly,
// compared as JSON, plus pod-template-hash, and both hold every future template field.
func checkTemplateCarried(ctx context.Context, t *testing.T, fs *futureServer, dyn dynamic.Interface, ns, name, rs string) {
	t.Helper()
	d, err := dyn.Resource(rawtemplate.Deployments).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dyn.Resource(rawtemplate.ReplicaSets).Namespace(ns).Get(ctx, rs, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dTemplate, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
	rsTemplate, _, _ := unstructured.NestedMap(r.Object, "spec", "template")
	for path, want := range templateFutureFields {
		v, _ := rawtemplate.Field(dTemplate, path)
		if got := asJSON(t, v); got != want {
			t.Errorf("Deployment %s template %s = %s, want %s", name, path, got, want)
		}
	}
	rawtemplate.WithoutLabel(rsTemplate, appsv1.DefaultDeploymentUniqueLabelKey)
	if a, b := asJSON(t, rsTemplate), asJSON(t, dTemplate); a != b {
		t.Errorf("ReplicaSet %s template without pod-template-hash:\n%s\nDeployment %s template:\n%s", rs, a, name, b)
	}
}

// checkPodsCarry: every pod of ReplicaSet rs was created with the future template fields, as noted by fs.
func checkPodsCarry(ctx context.Context, t *testing.T, fs *futureServer, ns, rs string) {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != rs || p.DeletionTimestamp != nil {
			continue
		}
		n++
		got := fs.unknown("pods", ns, p.Name)
		for path, want := range templateFutureFields {
			if v := asJSON(t, got[path]); v != want {
				t.Errorf("pod %s: %s = %s, want %s (all unknown fields: %v)", p.Name, path, v, want, got)
			}
		}
	}
	if n == 0 {
		t.Errorf("ReplicaSet %s has no pods", rs)
	}
}

// checkRefused: Deployment name has the event UnsupportedDeploymentField naming spec.someFutureField, no
// ReplicaSet and no status written by kubedeploy.
func checkRefused(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "event UnsupportedDeploymentField on "+name, func(ctx context.Context) (bool, error) {
		events, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name, "reason": deployment.UnsupportedDeploymentField}.String(),
		})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Type == "Warning" && strings.Contains(e.Message, "spec.someFutureField") {
				t.Logf("event: %s", e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	rss, err := env.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 0 || d.Status.ObservedGeneration != 0 || len(d.Status.Conditions) != 0 {
		t.Errorf("refused Deployment %s: %d ReplicaSets, status %+v; want none written", name, len(rss.Items), d.Status)
	}
}

// checkMetrics: kubedeploy_deployment_unsupported_fields lists the refused Deployment's field, and
// kubedeploy_api_server_version_skew says the server is one minor newer.
func checkMetrics(t *testing.T, ns string) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch {
			case mf.GetName() == "kubedeploy_deployment_unsupported_fields" &&
				reflect.DeepEqual(l, map[string]string{"namespace": ns, "deployment": "refused", "field": "spec.someFutureField"}):
				found[mf.GetName()] = m.GetGauge().GetValue() == 1
			case mf.GetName() == "kubedeploy_api_server_version_skew" && l["server_version"] == futureVersion.GitVersion:
				found[mf.GetName()] = m.GetGauge().GetValue() == 1 && l["compiled_version"] == "v1.36"
			}
		}
	}
	for _, name := range []string{"kubedeploy_deployment_unsupported_fields", "kubedeploy_api_server_version_skew"} {
		if !found[name] {
			t.Errorf("%s: no series with the expected labels and value", name)
		}
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
