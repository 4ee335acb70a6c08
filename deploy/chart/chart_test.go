// Package chart checks deploy/chart/kubedeploy, the Helm chart, with Helm's own command (issue 36): it lints with
// every values file, renders the objects deploy/, deploy/sharded and deploy/observe install, refuses bad values by
// its schema, and carries the same alert rules and dashboard as deploy/prometheus and deploy/grafana.
package chart

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/kubedeploy/kubedeploy/deploy"
	"github.com/kubedeploy/kubedeploy/internal/testing/helmtool"
)

// chartDir is the chart, relative to this package.
const chartDir = "kubedeploy"

// helmLabels are the labels the chart adds to every object beside deploy/'s: which release and chart made it.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// valuesFiles are the chart's values files beside its defaults.
var valuesFiles = []string{"values-sharded.yaml", "values-observe.yaml"}

func TestLintWithEveryValuesFile(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"-f", filepath.Join(chartDir, "values-sharded.yaml")},
		{"-f", filepath.Join(chartDir, "values-observe.yaml")},
		{"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true,createNamespace=true"},
		{"-f", filepath.Join(chartDir, "values-observe.yaml"), "--set", "serviceMonitor.enabled=true"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, err := helmtool.Run(t, append([]string{"lint", "--strict", chartDir}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint says:\n%s", out)
			}
		})
	}
}

// TestTemplateInstallsWhatDeployInstalls: `helm template` with the default values installs the objects of
// deploy/ (its Namespace with createNamespace=true; without, `helm install --create-namespace` makes it), with
// values-sharded.yaml those of deploy/ and deploy/sharded as docs/sharding.md applies them, with values-observe.yaml
// those of deploy/observe: the chart's RBAC cannot drift from deploy/'s, which `kubedeploy up` binds its
// controllers to.
func TestTemplateInstallsWhatDeployInstalls(t *testing.T) {
	controllers := mustObjects(t, deploy.Objects)
	sharded := slices.DeleteFunc(slices.Clone(controllers), func(o runtime.Object) bool {
		m, _ := meta.Accessor(o)
		return m.GetName() == "kubedeploy-controllers" // the active-passive StatefulSet; the leader Lease's Role stays (SH-10)
	})
	sharded = append(sharded, mustObjects(t, deploy.ShardedObjects)...)
	withoutNamespace := slices.DeleteFunc(slices.Clone(controllers), func(o runtime.Object) bool {
		return kindOf(t, o) == "Namespace"
	})
	for _, tc := range []struct {
		name string
		args []string
		want []runtime.Object
	}{
		{name: "defaults, createNamespace", args: []string{"--namespace", deploy.Namespace, "--set", "createNamespace=true"}, want: controllers},
		{name: "defaults", args: []string{"--namespace", deploy.Namespace}, want: withoutNamespace},
		{name: "values-sharded.yaml", args: []string{"--namespace", deploy.Namespace, "--set", "createNamespace=true", "-f", filepath.Join(chartDir, "values-sharded.yaml")}, want: sharded},
		{name: "values-observe.yaml", args: []string{"--namespace", "kubedeploy-observe", "--set", "createNamespace=true", "-f", filepath.Join(chartDir, "values-observe.yaml")}, want: mustObjects(t, deploy.ObserveObjects)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := normalize(t, decodeTyped(t, render(t, tc.args...)))
			want := normalize(t, tc.want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("helm template %v differs from deploy/ (-deploy/ +chart):\n%s", tc.args, diff)
			}
		})
	}
}

// TestSchemaRefusesBadValues: a wrong value fails at install with the schema's message, naming the value.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{set: "replicas=-1", want: []string{"/replicas", "minimum"}},
		{set: "mode=active", want: []string{"/mode", "controllers", "observe"}},
		{set: "replica=3", want: []string{"replica"}},
		{set: "controllers.securePort=70000", want: []string{"/controllers/securePort", "maximum"}},
		{set: "controllers.concurrentDeploymentSyncs=0", want: []string{"/controllers/concurrentDeploymentSyncs", "minimum"}},
		{set: "namespace=Kube_System", want: []string{"/namespace"}},
		{set: "image.pullPolicy=Sometimes", want: []string{"/image/pullPolicy"}},
		{set: "memoryPolicy.gcPercent=-2", want: []string{"/memoryPolicy/gcPercent", "minimum"}},
		{set: "memoryPolicy.memoryLimit=lots", want: []string{"/memoryPolicy/memoryLimit"}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := helmtool.Run(t, "template", "kubedeploy", chartDir, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want the schema to refuse it", tc.set)
			}
			msg := err.Error()
			if !strings.Contains(msg, "schema") {
				t.Errorf("--set %s: refused, but not by the schema:\n%s", tc.set, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("--set %s: the message does not say %q:\n%s", tc.set, w, msg)
				}
			}
		})
	}
}

// TestMemoryPolicyReachesObserve: observe mode gets memoryPolicy's flags too (issue 48), before its extraArgs.
func TestMemoryPolicyReachesObserve(t *testing.T) {
	objs := decodeTyped(t, render(t, "-f", filepath.Join(chartDir, "values-observe.yaml"),
		"--set", "memoryPolicy.gcPercent=100,memoryPolicy.memoryLimit=none,observe.extraArgs={--v=2}"))
	c := find[*appsv1.Deployment](t, objs, "Deployment", "kubedeploy-observe").Spec.Template.Spec.Containers[0]
	want := []string{"observe", "--bind-address=0.0.0.0", "--port=10261", "--gc-percent=100", "--memory-limit=none", "--v=2"}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
}

// TestValuesChangeWhatTheyName: the values a user sets reach the objects (image, replicas, flags, namespace,
// resources), and the leader-election Role follows the Lease the flags name.
func TestValuesChangeWhatTheyName(t *testing.T) {
	objs := decodeTyped(t, render(t, "--namespace", "ops",
		"--set", "image.repository=registry.example/kd,image.tag=v9,image.pullPolicy=Always,replicas=3",
		"--set", "leaderElection.namespace=ops,leaderElection.name=kd-leader",
		"--set", "controllers.concurrentDeploymentSyncs=8,controllers.extraArgs={--v=2}",
		"--set", "controllers.prometheusURL=http://prometheus.monitoring:9090,controllers.analysisAllowedAddresses={http://a:9090,http://b:9090}",
		"--set", "memoryPolicy.gcPercent=0,memoryPolicy.memoryLimit=400Mi",
		"--set", "resources.requests.cpu=1"))
	sts := find[*appsv1.StatefulSet](t, objs, "StatefulSet", "kubedeploy-controllers")
	c := sts.Spec.Template.Spec.Containers[0]
	if sts.Namespace != "ops" || *sts.Spec.Replicas != 3 || c.Image != "registry.example/kd:v9" || c.ImagePullPolicy != "Always" {
		t.Errorf("StatefulSet %s/%s: replicas %d, image %s (%s); want ops, 3, registry.example/kd:v9 (Always)", sts.Namespace, sts.Name, *sts.Spec.Replicas, c.Image, c.ImagePullPolicy)
	}
	wantArgs := []string{"--bind-address=0.0.0.0", "--secure-port=10260", "--leader-elect-resource-namespace=ops", "--leader-elect-resource-name=kd-leader", "--concurrent-deployment-syncs=8",
		"--prometheus-url=http://prometheus.monitoring:9090", "--analysis-allowed-addresses=http://a:9090,http://b:9090", "--gc-percent=0", "--memory-limit=400Mi", "--v=2"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	if got := c.Resources.Requests.Cpu().String(); got != "1" || c.Resources.Limits != nil {
		t.Errorf("resources = %v, want only the request cpu: 1 (given resources replace deploy/'s)", c.Resources)
	}
	role := find[*rbacv1.Role](t, objs, "Role", "kubedeploy:leader-election")
	if role.Namespace != "ops" || !slices.Equal(role.Rules[1].ResourceNames, []string{"kd-leader"}) {
		t.Errorf("leader-election Role %s: %v, want in ops for the Lease kd-leader", role.Namespace, role.Rules)
	}
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok && b.Subjects[0].Namespace != "ops" {
			t.Errorf("ClusterRoleBinding %s binds %s/%s, want the ServiceAccount in ops", m.GetName(), b.Subjects[0].Namespace, b.Subjects[0].Name)
		}
	}
}

// TestChartCopiesAreDeploys: the chart's copies of the alert rules and the dashboard are deploy/'s.
func TestChartCopiesAreDeploys(t *testing.T) {
	for _, f := range []struct{ copy, source string }{
		{"kubedeploy/files/kubedeploy-rules.yaml", "../prometheus/kubedeploy-rules.yaml"},
		{"kubedeploy/files/kubedeploy-rollouts.json", "../grafana/kubedeploy-rollouts.json"},
	} {
		a, b := mustRead(t, f.copy), mustRead(t, f.source)
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/chart/%s differs from deploy/%s: cp deploy/%[2]s deploy/chart/%[1]s", f.copy, strings.TrimPrefix(f.source, "../"))
		}
	}
}

// TestMonitoringObjects: with the Prometheus Operator's objects and the dashboard on, the ServiceMonitor scrapes
// the Service's port, the PrometheusRule holds deploy/prometheus's groups, the ConfigMap holds the dashboard with
// the sidecar's label.
func TestMonitoringObjects(t *testing.T) {
	for _, mode := range []struct{ values, service, port string }{
		{"values.yaml", "kubedeploy-controllers", "https-metrics"},
		{"values-observe.yaml", "kubedeploy-observe", "http-metrics"},
	} {
		t.Run(mode.values, func(t *testing.T) {
			objs := decodeUnstructured(t, render(t, "--namespace", "monitoring-test", "-f", filepath.Join(chartDir, mode.values),
				"--set", "serviceMonitor.enabled=true,serviceMonitor.labels.release=prom,prometheusRule.enabled=true,grafanaDashboard.enabled=true"))
			checkServiceMonitor(t, objs, mode.service, mode.port)
			checkPrometheusRule(t, objs)
			checkDashboard(t, objs)
		})
	}
}

// checkServiceMonitor checks that the ServiceMonitor for service carries the given label and scrapes port, the
// Service's, of the Service it selects.
func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured, service, port string) {
	t.Helper()
	sm := findUnstructured(t, objs, "ServiceMonitor", service)
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v, want release=prom", sm.GetLabels())
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := findUnstructured(t, objs, "Service", service)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != port || ports[0].(map[string]any)["name"] != port {
		t.Errorf("ServiceMonitor endpoints %v, Service ports %v: want both on %s", eps, ports, port)
	}
	if sel["app.kubernetes.io/name"] != svc.GetLabels()["app.kubernetes.io/name"] {
		t.Errorf("ServiceMonitor selects %v, the Service is labelled %v", sel, svc.GetLabels())
	}
}

// checkPrometheusRule checks that the PrometheusRule's groups are deploy/prometheus/kubedeploy-rules.yaml's.
func checkPrometheusRule(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	rule := findUnstructured(t, objs, "PrometheusRule", "kubedeploy-rollouts")
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(mustRead(t, "../prometheus/kubedeploy-rules.yaml"), &file); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(file.Groups) == 0 || !cmp.Equal(groups, file.Groups) {
		t.Errorf("PrometheusRule groups differ from deploy/prometheus/kubedeploy-rules.yaml's: %s", cmp.Diff(file.Groups, groups))
	}
}

// checkDashboard checks that the dashboard ConfigMap has the sidecar's label and deploy/grafana's JSON.
func checkDashboard(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cm := findUnstructured(t, objs, "ConfigMap", "kubedeploy-rollouts-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "kubedeploy-rollouts.json")
	var got, want any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("dashboard ConfigMap: %v", err)
	}
	if err := json.Unmarshal(mustRead(t, "../grafana/kubedeploy-rollouts.json"), &want); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(got, want) {
		t.Error("the dashboard ConfigMap's JSON differs from deploy/grafana/kubedeploy-rollouts.json")
	}
}

// TestNotesSayWhatToCheck: the install's notes say how to check it runs and, for the controllers, that
// kube-controller-manager's deployment and replicaset controllers must be off.
func TestNotesSayWhatToCheck(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"values.yaml", []string{"--controllers=*,-deployment,-replicaset", "get lease kubedeploy-controllers", "kubedeploy:metrics-reader"}},
		{"values-sharded.yaml", []string{"--controllers=*,-deployment,-replicaset", "kubedeploy shards --namespace=kubedeploy-system"}},
		{"values-observe.yaml", []string{"rollout status deployment/kubedeploy-observe", "/metrics"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			// helm template does not render the notes; a client-side dry run of the install does, without a cluster.
			out, err := helmtool.Run(t, "install", "kubedeploy", chartDir, "--dry-run=client", "--kubeconfig", filepath.Join(t.TempDir(), "none"),
				"--namespace", deploy.Namespace, "-f", filepath.Join(chartDir, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, out, _ = strings.Cut(out, "NOTES:")
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("NOTES.txt does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// render runs `helm template kubedeploy <chart>` with args and returns its output.
func render(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmtool.Run(t, append([]string{"template", "kubedeploy", chartDir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// documents splits a multi-document YAML stream, dropping documents with nothing but comments.
func documents(t *testing.T, s string) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if len(m) > 0 {
			out = append(out, doc)
		}
	}
}

// decodeTyped decodes the rendered objects with client-go's scheme, as deploy.Objects decodes deploy/'s.
func decodeTyped(t *testing.T, s string) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, doc := range documents(t, s) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		out = append(out, obj)
	}
	return out
}

// decodeUnstructured decodes the rendered objects as unstructured ones (the Prometheus Operator's kinds are not
// in client-go's scheme).
func decodeUnstructured(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range documents(t, s) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// normalize returns objs as maps keyed by kind, namespace and name, without the labels only Helm adds.
func normalize(t *testing.T, objs []runtime.Object) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopyObject()
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		labels := m.GetLabels()
		for _, k := range helmLabels {
			delete(labels, k)
		}
		if len(labels) == 0 {
			labels = nil
		}
		m.SetLabels(labels)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s %s/%s", kindOf(t, o), m.GetNamespace(), m.GetName())
		if _, dup := out[key]; dup {
			t.Errorf("%s twice", key)
		}
		out[key] = u
	}
	return out
}

func mustObjects(t *testing.T, f func() ([]runtime.Object, error)) []runtime.Object {
	t.Helper()
	objs, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// find returns the object of kind and name in objs, as T.
func find[T runtime.Object](t *testing.T, objs []runtime.Object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		if kindOf(t, o) == kind && m.GetName() == name {
			if v, ok := o.(T); ok {
				return v
			}
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	var zero T
	return zero
}

// findUnstructured returns the object of kind and name in objs.
func findUnstructured(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// kindOf returns o's kind in client-go's scheme.
func kindOf(t *testing.T, o runtime.Object) string {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil {
		t.Fatal(err)
	}
	return gvks[0].Kind
}

// prometheusRule's thresholds each set their alert's and nothing else of the rules:
// awaitingPromotionSeconds KubedeployRolloutAwaitingPromotion's (EX-5), analysisPausedSeconds
// KubedeployRolloutAnalysisPaused's (EX-6).
func TestRuleThresholds(t *testing.T) {
	for _, tc := range []struct {
		name, set, want, gone string
	}{
		{name: "awaitingPromotionSeconds", set: "prometheusRule.awaitingPromotionSeconds=900",
			want: `kubedeploy_rollout_paused_seconds{waits_for=\"promotion\"}) \u003e 900`, gone: "3600"},
		{name: "analysisPausedSeconds", set: "prometheusRule.analysisPausedSeconds=120",
			want: `{phase=~\"Inconclusive|Error\"}) \u003e= 120`, gone: `Error\"}) \u003e= 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeUnstructured(t, render(t, "--namespace", "monitoring-test", "--set", "prometheusRule.enabled=true,"+tc.set))
			rule := findUnstructured(t, objs, "PrometheusRule", "kubedeploy-rollouts")
			got, err := json.Marshal(rule.Object["spec"])
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), tc.want) || strings.Contains(string(got), tc.gone) {
				t.Errorf("the PrometheusRule does not hold %s alone:\n%s", tc.want, got)
			}
		})
	}
}
