package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// APIServerRequests reads kube-apiserver's /metrics through client and returns its apiserver_request_total
// counters (requests) summed by key(labels), where labels are one series' label names and values; series for which
// key returns "" are left out. It fails t when /metrics cannot be read or parsed.
func APIServerRequests(ctx context.Context, t *testing.T, client kubernetes.Interface, key func(labels map[string]string) string) map[string]float64 {
	t.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading kube-apiserver /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, p := range m.GetLabel() {
			labels[p.GetName()] = p.GetValue()
		}
		if k := key(labels); k != "" {
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}
