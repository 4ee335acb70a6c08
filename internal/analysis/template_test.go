package analysis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// templateCM returns an analysis template ConfigMap ns/name holding metrics.
func templateCM(name, metrics string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{TemplateLabel: "true"}},
		Data:       map[string]string{MetricsKey: metrics},
	}
}

const errorRate = `
- name: error-rate
  interval: 30s
  count: 5
  failureLimit: 1
  successCondition: result < 0.01
  provider:
    prometheus:
      query: |
        sum(rate(http_requests_total{code=~"5..",pod_template_hash="{{ .NewPodTemplateHash }}"}[2m]))
        / sum(rate(http_requests_total{pod_template_hash="{{ .NewPodTemplateHash }}"}[2m]))
`

// EX-6: the example parses, and Settings gives each field typed with Argo's defaults where unset.
func TestParseTemplateSettings(t *testing.T) {
	cases := []struct {
		name, metrics string
		want          Settings
	}{
		{"issue example", errorRate, Settings{Count: 5, Interval: 30 * time.Second, FailureLimit: 1, ConsecutiveErrorLimit: 4}},
		{"defaults", "- {name: up, successCondition: result.notReady == 0, provider: {pods: {}}}",
			Settings{Count: 1, ConsecutiveErrorLimit: DefaultConsecutiveErrorLimit}},
		{"every field", `- name: all
  interval: 2s
  count: 3
  initialDelay: 1m
  failureCondition: result > 0.1
  failureLimit: 2
  inconclusiveLimit: 3
  consecutiveErrorLimit: 0
  provider: {prometheus: {query: "up", address: "http://prom:9090", timeout: 5s}}`,
			Settings{Count: 3, Interval: 2 * time.Second, InitialDelay: time.Minute, FailureLimit: 2, InconclusiveLimit: 3, Timeout: 5 * time.Second}},
		{"JSON", `[{"name": "j", "successCondition": "result < 1", "provider": {"prometheus": {"query": "up"}}}]`,
			Settings{Count: 1, ConsecutiveErrorLimit: 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			metrics, err := ParseTemplate(templateCM("t", tc.metrics))
			if err != nil {
				t.Fatal(err)
			}
			if len(metrics) != 1 || metrics[0].Template != "ns/t" {
				t.Fatalf("metrics = %+v, want one from ns/t", metrics)
			}
			if diff := cmp.Diff(tc.want, metrics[0].Settings()); diff != "" {
				t.Errorf("Settings (-want +got):\n%s", diff)
			}
		})
	}
}

// EX-6: every template kubedeploy cannot use is refused with one line naming the ConfigMap, the metric and
// the fault; in particular a metric without any condition (Argo would count every measurement Successful).
func TestParseTemplateRefuses(t *testing.T) {
	pods := "provider: {pods: {}}"
	prom := func(p string) string { return "successCondition: result < 1, provider: {prometheus: {" + p + "}}" }
	cases := []struct {
		name, metrics string
		want          string // a substring of the error
	}{
		{"not YAML", "- name: [", "do not parse as YAML"},
		{"duplicate key", "- {name: a, name: b, successCondition: x, " + pods + "}", "do not parse"},
		{"not a list", "name: a", "not a YAML list"},
		{"empty list", "[]", "no metrics"},
		{"null", "", "not a YAML list"},
		{"unknown key", "- {name: a, intervall: 1s, successCondition: result.ready > 0, " + pods + "}", `metric 1 ("a"): unknown field "intervall"`},
		{"wrong case", "- {name: a, SuccessCondition: result.ready > 0, " + pods + "}", `unknown field "SuccessCondition"`},
		{"unknown provider key", "- {name: a, successCondition: result.ready > 0, provider: {pods: {x: 1}}}", `unknown field "provider.pods.x"`},
		{"count not a number", "- {name: a, count: many, successCondition: result.ready > 0, " + pods + "}", "metric 1"},
		{"no name", "- {successCondition: result.ready > 0, " + pods + "}", "metric 1: no name"},
		{"invalid name", "- {name: 'a b', successCondition: result.ready > 0, " + pods + "}", `metric "a b": name "a b" is not a label value`},
		{"duplicate name", "- {name: a, successCondition: result.ready > 0, " + pods + "}\n- {name: a, successCondition: result.ready > 0, " + pods + "}", `metric "a": a metric of that name comes earlier`},
		{"no provider", "- {name: a, successCondition: result < 1}", "want exactly one provider"},
		{"pods null", "- {name: a, successCondition: result < 1, provider: {pods: }}", "not null"},
		{"two providers", "- {name: a, successCondition: result < 1, provider: {pods: {}, prometheus: {query: up}}}", "want exactly one provider"},
		{"empty query", "- {name: a, " + prom("query: ' '") + "}", "prometheus query is empty"},
		{"query does not parse", "- {name: a, " + prom("query: 'up{x=\"{{ .Namespace \"}'") + "}", "query template does not parse"},
		{"query unknown field", "- {name: a, " + prom("query: 'up{x=\"{{ .Namespac }}\"}'") + "}", "can't evaluate field Namespac"},
		{"address not http", "- {name: a, " + prom("query: up, address: 'prom:9090'") + "}", `prometheus address: "prom:9090" is not an http:// or https:// URL`},
		{"timeout does not parse", "- {name: a, " + prom("query: up, timeout: '5'") + "}", `prometheus timeout "5" does not parse`},
		{"timeout a number", "- {name: a, " + prom("query: up, timeout: 5") + "}", "cannot unmarshal number"},
		{"timeout too long", "- {name: a, " + prom("query: up, timeout: 2m") + "}", "above the maximum 1m0s"},
		{"interval does not parse", "- {name: a, interval: soon, successCondition: result.ready > 0, " + pods + "}", `interval "soon" does not parse`},
		{"interval zero", "- {name: a, interval: 0s, successCondition: result.ready > 0, " + pods + "}", `interval "0s" is not positive`},
		{"initialDelay negative", "- {name: a, initialDelay: -1s, successCondition: result.ready > 0, " + pods + "}", `initialDelay "-1s" is not positive`},
		{"count without interval", "- {name: a, count: 3, successCondition: result.ready > 0, " + pods + "}", "count 3 needs an interval"},
		{"count zero", "- {name: a, count: 0, successCondition: result.ready > 0, " + pods + "}", "count 0 is below 1"},
		{"negative failureLimit", "- {name: a, failureLimit: -1, successCondition: result.ready > 0, " + pods + "}", "failureLimit -1 is negative"},
		{"negative inconclusiveLimit", "- {name: a, inconclusiveLimit: -2, successCondition: result.ready > 0, " + pods + "}", "inconclusiveLimit -2 is negative"},
		{"negative consecutiveErrorLimit", "- {name: a, consecutiveErrorLimit: -1, successCondition: result.ready > 0, " + pods + "}", "consecutiveErrorLimit -1 is negative"},
		{"no condition", "- {name: a, " + pods + "}", "never counts a measurement as successful without one"},
		{"condition syntax", "- {name: a, successCondition: 'result <', " + pods + "}", `successCondition "result <" does not compile`},
		{"condition not bool", "- {name: a, failureCondition: 'result + 1', " + pods + "}", `failureCondition "result + 1" has type int, want bool`},
		{"condition unknown variable", "- {name: a, successCondition: 'value < 1', " + pods + "}", "undeclared reference to 'value'"},
		{"condition too long", "- {name: a, successCondition: '" + strings.Repeat("result < 1 && ", 200) + "true', " + pods + "}", "successCondition is 2804 characters long, above the maximum 2048"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTemplate(templateCM("t", tc.metrics))
			if err == nil {
				t.Fatalf("ParseTemplate accepted %q", tc.metrics)
			}
			var te *TemplateError
			if !errors.As(err, &te) || te.Template != "ns/t" {
				t.Errorf("error %v is not a *TemplateError for ns/t", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "analysis template ns/t") {
				t.Errorf("error %q, want one line starting with the template and containing %q", msg, tc.want)
			}
		})
	}
}

// A ConfigMap that is not an analysis template is refused before its data is read.
func TestParseTemplateRefusesConfigMaps(t *testing.T) {
	unlabelled := templateCM("t", errorRate)
	unlabelled.Labels = nil
	falseLabel := templateCM("t", errorRate)
	falseLabel.Labels[TemplateLabel] = "yes"
	noKey := templateCM("t", errorRate)
	noKey.Data = map[string]string{"metric": errorRate}
	cases := []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		{"no label", unlabelled, `label kubedeploy.io/analysis-template="true" missing`},
		{"label not true", falseLabel, `label kubedeploy.io/analysis-template="true" missing`},
		{"no metrics key", noKey, `no data key "metrics"`},
		{"nil", nil, "no ConfigMap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseTemplate(tc.cm); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseTemplate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// EX-6: Resolve gives the metrics of several templates in order, and refuses what would make the analysis
// ambiguous or unrunnable: a missing template, one that is not labelled, a metric name twice, a missing arg.
func TestResolve(t *testing.T) {
	store := map[string]*corev1.ConfigMap{
		"error-rate":  templateCM("error-rate", errorRate),
		"pods":        templateCM("pods", "- {name: ready, successCondition: result.notReady == 0, provider: {pods: {}}}"),
		"latency":     templateCM("latency", `- {name: p99, successCondition: result < 0.5, provider: {prometheus: {query: 'q{svc="{{ .Args.service }}",p="{{.Args.p}}"}'}}}`),
		"again":       templateCM("again", "- {name: ready, successCondition: result.ready > 0, provider: {pods: {}}}"),
		"plain":       {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}, Data: map[string]string{MetricsKey: errorRate}},
		"conditional": templateCM("conditional", `- {name: c, successCondition: result < 0.5, provider: {prometheus: {query: '{{ if .Args.x }}a{{ else }}{{ with .Args.y }}b{{ end }}{{ end }}'}}}`),
	}
	get := func(name string) (*corev1.ConfigMap, error) {
		if name == "broken" {
			return nil, fmt.Errorf("configmap %q is\nforbidden", name)
		}
		return store[name], nil
	}
	args := []Arg{{Name: "service", Value: "web"}, {Name: "p", Value: "99"}}
	cases := []struct {
		name      string
		templates []string
		args      []Arg
		want      []string // metric names, or nil with wantErr
		wantErr   string
	}{
		{"in order", []string{"pods", "error-rate", "latency"}, args, []string{"ready", "error-rate", "p99"}, ""},
		{"no templates", nil, nil, nil, "no templates named"},
		{"missing", []string{"pods", "nope"}, nil, nil, `analysis template "nope": not found`},
		{"get error", []string{"broken"}, nil, nil, `analysis template "broken": configmap "broken" is; forbidden`},
		{"unlabelled", []string{"plain"}, nil, nil, "not an analysis template"},
		{"duplicate metric", []string{"pods", "again"}, nil, nil, `analysis template ns/again, metric "ready": template ns/pods has a metric of that name too`},
		{"same template twice", []string{"pods", "pods"}, nil, nil, "has a metric of that name too"},
		{"missing arg", []string{"latency"}, args[:1], nil, "the query uses .Args.p, which the analysis does not give"},
		{"arg in a branch", []string{"conditional"}, []Arg{{Name: "x", Value: "1"}}, nil, "uses .Args.y"},
		{"duplicate arg", []string{"pods"}, []Arg{{Name: "a"}, {Name: "a"}}, nil, `"a" is given twice`},
		{"unnamed arg", []string{"pods"}, []Arg{{Value: "v"}}, nil, "an arg has no name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			metrics, err := Resolve(tc.templates, get, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Resolve = %v, want one line containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range metrics {
				names = append(names, m.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("metric names (-want +got):\n%s", diff)
			}
		})
	}
}
