package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	// TemplateLabel marks a ConfigMap as an analysis template (EX-6); its value must be "true". A ConfigMap
	// without it is never read as a template, so a name in a step cannot pick up an unrelated ConfigMap.
	TemplateLabel = "kubedeploy.io/analysis-template"
	// MetricsKey is the ConfigMap data key that holds the template's metrics: a YAML (or JSON) list of Metric.
	MetricsKey = "metrics"
)

// Defaults and bounds of a Metric's fields (EX-6). The limits' defaults are Argo Rollouts'.
const (
	// DefaultCount is the number of measurements of a metric without `count`.
	DefaultCount = 1
	// DefaultConsecutiveErrorLimit is how many Error measurements in a row a metric tolerates without
	// `consecutiveErrorLimit` (Argo's 4): the fifth in a row ends the metric as errored.
	DefaultConsecutiveErrorLimit = 4
	// DefaultQueryTimeout is how long a Prometheus query may take, without a template `timeout` or
	// Prometheus.Timeout.
	DefaultQueryTimeout = 10 * time.Second
	// MaxQueryTimeout is the longest `timeout` a template or Prometheus.Timeout may set: a measurement holds
	// the caller at most this long.
	MaxQueryTimeout = time.Minute
)

// Metric is one item of a template's metrics list (EX-6), with Argo Rollouts' field names. Durations are Go
// duration strings ("30s", "2m"); Settings gives them and the limits typed, with their defaults. A Metric
// from ParseTemplate or Resolve is valid; one built by hand is checked only by Measure.
type Metric struct {
	// Name identifies the metric in events, `rollout watch`, the state annotation and metric labels: a
	// label value (at most 63 characters: letters, digits, '-', '_', '.'), unique across an analysis.
	Name string `json:"name"`
	// Interval is the time between two measurements; required when Count > 1.
	Interval string `json:"interval,omitempty"`
	// Count is the number of measurements, at least 1; DefaultCount when unset.
	Count *int32 `json:"count,omitempty"`
	// InitialDelay is the wait before the first measurement, from the start of the analysis.
	InitialDelay string `json:"initialDelay,omitempty"`
	// SuccessCondition and FailureCondition are CEL expressions over `result` (Conditions). At least one is
	// required: unlike Argo, kubedeploy never counts a measurement as Successful without a condition.
	SuccessCondition string `json:"successCondition,omitempty"`
	FailureCondition string `json:"failureCondition,omitempty"`
	// FailureLimit is how many Failed measurements the metric tolerates (default 0): one more fails it.
	FailureLimit *int32 `json:"failureLimit,omitempty"`
	// InconclusiveLimit is how many Inconclusive measurements the metric tolerates (default 0).
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`
	// ConsecutiveErrorLimit is how many Error measurements in a row the metric tolerates
	// (DefaultConsecutiveErrorLimit when unset).
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`
	// Provider says what is measured.
	Provider Provider `json:"provider"`
	// Template is the namespace/name of the ConfigMap the metric came from, set by ParseTemplate (never read
	// from the YAML).
	Template string `json:"-"`
}

// Provider is where a metric's result comes from: exactly one field is set.
type Provider struct {
	// Prometheus is an instant query.
	Prometheus *PrometheusProvider `json:"prometheus,omitempty"`
	// Pods counts the new ReplicaSet's pods (PodsResult); written `pods: {}`.
	Pods *PodsProvider `json:"pods,omitempty"`
}

// PrometheusProvider is an instant PromQL query (EX-6).
type PrometheusProvider struct {
	// Query is a Go text/template over QueryArgs (RenderQuery) that renders to PromQL.
	Query string `json:"query"`
	// Address is the Prometheus to query; empty means Prometheus.DefaultAddress (`--prometheus-url`). Any
	// other address is queried only when the operator allowed it (Prometheus.Address).
	Address string `json:"address,omitempty"`
	// Timeout bounds the query (a Go duration, at most MaxQueryTimeout); empty means Prometheus.Timeout.
	Timeout string `json:"timeout,omitempty"`
}

// PodsProvider measures the new ReplicaSet's pods (PodsResultOf); it has no fields.
type PodsProvider struct{}

// Arg is one argument of an analysis step (`args: [{name, value}]`), read by queries as `{{ .Args.NAME }}`.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Settings are a Metric's schedule and limits, typed and defaulted.
type Settings struct {
	// Count is the number of measurements (≥ 1).
	Count int32
	// Interval is the time between measurements; 0 when the metric has none (Count is then 1).
	Interval time.Duration
	// InitialDelay is the wait before the first measurement; 0 for none.
	InitialDelay time.Duration
	// FailureLimit, InconclusiveLimit and ConsecutiveErrorLimit are the measurements of each phase tolerated
	// (≥ 0): the metric fails, or pauses the rollout for a human, when the count goes above its limit.
	FailureLimit, InconclusiveLimit, ConsecutiveErrorLimit int32
	// Timeout is the template's Prometheus query timeout; 0 means Prometheus.Timeout.
	Timeout time.Duration
}

// Settings returns m's schedule and limits with their defaults. A duration that does not parse reads as 0
// (ParseTemplate refuses those).
func (m Metric) Settings() Settings {
	s := Settings{
		Count:                 orDefault(m.Count, DefaultCount),
		Interval:              durationOrZero(m.Interval),
		InitialDelay:          durationOrZero(m.InitialDelay),
		FailureLimit:          orDefault(m.FailureLimit, 0),
		InconclusiveLimit:     orDefault(m.InconclusiveLimit, 0),
		ConsecutiveErrorLimit: orDefault(m.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit),
	}
	if m.Provider.Prometheus != nil {
		s.Timeout = durationOrZero(m.Provider.Prometheus.Timeout)
	}
	return s
}

func orDefault(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func durationOrZero(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}

// TemplateError is why a template, or one of its metrics, cannot be used. Error gives one line naming both.
type TemplateError struct {
	// Template is the ConfigMap's namespace/name.
	Template string
	// Metric is the metric's name, or "metric N" (1-based) when it has none; empty for the whole template.
	Metric string
	// Fault is what is wrong.
	Fault string
}

func (e *TemplateError) Error() string {
	if e.Metric == "" {
		return fmt.Sprintf("analysis template %s: %s", e.Template, e.Fault)
	}
	return fmt.Sprintf("analysis template %s, %s: %s", e.Template, e.Metric, e.Fault)
}

// ParseTemplate reads the metrics of the analysis template cm (EX-6): strict YAML (unknown or duplicate
// keys refused), every metric checked. Errors are *TemplateError: cm without TemplateLabel "true", without
// MetricsKey, not a list or an empty one, and per metric an empty, invalid or duplicate name, not exactly one
// provider, a duration that does not parse or is not positive, `interval` missing with count > 1, count < 1,
// a negative limit, no condition at all, a condition that does not compile as a bool CEL expression, a query
// template that does not parse or uses a field QueryArgs lacks.
func ParseTemplate(cm *corev1.ConfigMap) ([]Metric, error) {
	if cm == nil {
		return nil, &TemplateError{Template: "<nil>", Fault: "no ConfigMap"}
	}
	id := cm.Namespace + "/" + cm.Name
	fail := func(metric, format string, a ...any) error {
		return &TemplateError{Template: id, Metric: metric, Fault: fmt.Sprintf(format, a...)}
	}
	if v, ok := cm.Labels[TemplateLabel]; !ok || v != "true" {
		return nil, fail("", "not an analysis template: label %s=\"true\" missing", TemplateLabel)
	}
	data, ok := cm.Data[MetricsKey]
	if !ok {
		return nil, fail("", "no data key %q (a YAML list of metrics)", MetricsKey)
	}
	items, err := metricItems(data)
	if err != nil {
		return nil, fail("", "%s", oneLine(err.Error()))
	}
	metrics := make([]Metric, 0, len(items))
	seen := map[string]bool{}
	for i, raw := range items {
		var m Metric
		label := fmt.Sprintf("metric %d", i+1)
		if err := decodeStrict(raw, &m); err != nil {
			return nil, fail(label+nameHint(raw), "%s", oneLine(err.Error()))
		}
		if m.Name != "" {
			label = fmt.Sprintf("metric %q", m.Name)
		}
		if fault := m.check(seen); fault != "" {
			return nil, fail(label, "%s", fault)
		}
		seen[m.Name] = true
		m.Template = id
		metrics = append(metrics, m)
	}
	return metrics, nil
}

// metricItems splits data into its list items, each as JSON; errors on duplicate keys, on anything but a
// list and on an empty list.
func metricItems(data string) ([]json.RawMessage, error) {
	js, err := yaml.YAMLToJSONStrict([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("metrics do not parse as YAML: %w", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(js, &items); err != nil || js[0] != '[' {
		return nil, fmt.Errorf("metrics is not a YAML list of metrics")
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no metrics: the list is empty")
	}
	return items, nil
}

// decodeStrict decodes the JSON raw into m with Kubernetes' strict rules: keys match field names exactly
// (case included; encoding/json, and so yaml.UnmarshalStrict, would take `SuccessCondition`), no unknown or
// duplicate keys.
func decodeStrict(raw json.RawMessage, m *Metric) error {
	strict, err := kjson.UnmarshalStrict(raw, m)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// nameHint is ` ("NAME")` when raw has a string name, for errors about a metric that does not decode.
func nameHint(raw json.RawMessage) string {
	var n struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &n) != nil || n.Name == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", n.Name)
}

// check returns what is wrong with m, "" if nothing; seen holds the names of the metrics before it.
func (m Metric) check(seen map[string]bool) string {
	switch {
	case m.Name == "":
		return "no name"
	case len(validation.IsValidLabelValue(m.Name)) > 0:
		return fmt.Sprintf("name %q is not a label value (at most 63 letters, digits, '-', '_', '.')", m.Name)
	case seen[m.Name]:
		return "a metric of that name comes earlier: names must be unique"
	}
	for _, check := range []func() string{m.checkSchedule, m.checkLimits, m.checkProvider, m.checkConditions} {
		if fault := check(); fault != "" {
			return fault
		}
	}
	return ""
}

func (m Metric) checkSchedule() string {
	if m.Count != nil && *m.Count < 1 {
		return fmt.Sprintf("count %d is below 1", *m.Count)
	}
	if fault := checkDuration("interval", m.Interval); fault != "" {
		return fault
	}
	if fault := checkDuration("initialDelay", m.InitialDelay); fault != "" {
		return fault
	}
	if m.Interval == "" && orDefault(m.Count, DefaultCount) > 1 {
		return fmt.Sprintf("count %d needs an interval between measurements", *m.Count)
	}
	return ""
}

// checkDuration returns what is wrong with the duration field named field, "" when it is empty or positive.
func checkDuration(field, v string) string {
	if v == "" {
		return ""
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return fmt.Sprintf("%s %q does not parse (want e.g. \"30s\", \"2m\")", field, v)
	case d <= 0:
		return fmt.Sprintf("%s %q is not positive", field, v)
	}
	return ""
}

func (m Metric) checkLimits() string {
	for _, l := range []struct {
		name string
		v    *int32
	}{{"failureLimit", m.FailureLimit}, {"inconclusiveLimit", m.InconclusiveLimit}, {"consecutiveErrorLimit", m.ConsecutiveErrorLimit}} {
		if l.v != nil && *l.v < 0 {
			return fmt.Sprintf("%s %d is negative", l.name, *l.v)
		}
	}
	return ""
}

func (m Metric) checkProvider() string {
	p := m.Provider
	switch {
	case (p.Prometheus == nil) == (p.Pods == nil):
		return "want exactly one provider: prometheus: {query: …} or pods: {} (an empty map, not null)"
	case p.Pods != nil:
		return ""
	case strings.TrimSpace(p.Prometheus.Query) == "":
		return "prometheus query is empty"
	}
	if p.Prometheus.Address != "" {
		if _, err := normalizeAddress(p.Prometheus.Address); err != nil {
			return "prometheus address: " + err.Error()
		}
	}
	if fault := checkDuration("prometheus timeout", p.Prometheus.Timeout); fault != "" {
		return fault
	}
	if d := durationOrZero(p.Prometheus.Timeout); d > MaxQueryTimeout {
		return fmt.Sprintf("prometheus timeout %q is above the maximum %s", p.Prometheus.Timeout, MaxQueryTimeout)
	}
	if _, err := parseQuery(p.Prometheus.Query); err != nil {
		return "prometheus query: " + oneLine(err.Error())
	}
	return ""
}

func (m Metric) checkConditions() string {
	if m.SuccessCondition == "" && m.FailureCondition == "" {
		return "no successCondition or failureCondition: kubedeploy never counts a measurement as successful without one"
	}
	if _, err := CompileConditions(m.SuccessCondition, m.FailureCondition); err != nil {
		return oneLine(err.Error())
	}
	return ""
}

// Resolve returns the metrics of the templates names, in order (each template's in its own order), read by
// get (the caller's ConfigMap lister for the Deployment's namespace). args are the step's arguments; every
// `.Args.NAME` a query uses must be among them. Errors: no names, a template get cannot find (its error), one
// ParseTemplate refuses, two metrics of the same name across the templates, a duplicate or missing arg.
func Resolve(names []string, get func(name string) (*corev1.ConfigMap, error), args []Arg) ([]Metric, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("analysis: no templates named")
	}
	given, err := argNames(args)
	if err != nil {
		return nil, err
	}
	var all []Metric
	from := map[string]string{}
	for _, name := range names {
		cm, err := get(name)
		if err == nil && cm == nil {
			err = fmt.Errorf("not found")
		}
		if err != nil {
			return nil, fmt.Errorf("analysis template %q: %s", name, oneLine(err.Error()))
		}
		metrics, err := ParseTemplate(cm)
		if err != nil {
			return nil, err
		}
		for _, m := range metrics {
			if t, dup := from[m.Name]; dup {
				return nil, &TemplateError{Template: m.Template, Metric: fmt.Sprintf("metric %q", m.Name), Fault: "template " + t + " has a metric of that name too: names must be unique in an analysis"}
			}
			from[m.Name] = m.Template
			if err := checkArgs(m, given); err != nil {
				return nil, err
			}
		}
		all = append(all, metrics...)
	}
	return all, nil
}

// argNames returns the set of args' names; errors on an empty or duplicate name.
func argNames(args []Arg) (map[string]bool, error) {
	names := map[string]bool{}
	for _, a := range args {
		switch {
		case a.Name == "":
			return nil, fmt.Errorf("analysis args: an arg has no name")
		case names[a.Name]:
			return nil, fmt.Errorf("analysis args: %q is given twice", a.Name)
		}
		names[a.Name] = true
	}
	return names, nil
}

// checkArgs errors when m's query uses an arg that is not in given.
func checkArgs(m Metric, given map[string]bool) error {
	if m.Provider.Prometheus == nil {
		return nil
	}
	t, err := parseQuery(m.Provider.Prometheus.Query)
	if err != nil {
		return &TemplateError{Template: m.Template, Metric: fmt.Sprintf("metric %q", m.Name), Fault: oneLine(err.Error())}
	}
	for _, name := range queryArgNames(t) {
		if !given[name] {
			return &TemplateError{Template: m.Template, Metric: fmt.Sprintf("metric %q", m.Name),
				Fault: fmt.Sprintf("the query uses .Args.%s, which the analysis does not give (args: [{name: %s, value: …}])", name, name)}
		}
	}
	return nil
}

// ArgMap returns args as the map QueryArgs.Args holds (a later duplicate wins; Resolve refuses duplicates).
func ArgMap(args []Arg) map[string]string {
	m := make(map[string]string, len(args))
	for _, a := range args {
		m[a.Name] = a.Value
	}
	return m
}

// normalizeAddress returns a Prometheus address in the form addresses are compared in: an absolute http or
// https URL, scheme and host lower-cased, the scheme's default port dropped, no trailing slash. Errors on
// anything else.
func normalizeAddress(addr string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(addr))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", addr)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http:// or https:// URL", addr)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	u.Host = host
	if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
	}
	if port != "" {
		u.Host += ":" + port
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath, u.Fragment, u.RawFragment = "", "", ""
	return u.String(), nil
}

// oneLine joins the lines of s with "; " and collapses runs of white space, for errors, events and messages.
func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), ":\n", ": ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
