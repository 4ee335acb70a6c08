package controllerscmd

import (
	"github.com/spf13/pflag"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
)

// AddAnalysisFlags adds the flags of rollout steps' analyses (EX-6) to f, into p: --prometheus-url, the
// Prometheus every prometheus metric queries unless its template names another address, and
// --analysis-allowed-addresses, the only other addresses a template may name (none by default, so whoever may
// write a ConfigMap cannot point the controllers at an arbitrary URL). `kubedeploy controllers` and `kubedeploy
// up` share them; manager.Config.Validate checks them (absolute http(s) URLs).
func AddAnalysisFlags(f *pflag.FlagSet, p *analysis.Prometheus) {
	f.StringVar(&p.DefaultAddress, "prometheus-url", "", "Prometheus that rollout steps' analyses query (e.g. http://prometheus.monitoring:9090); empty: a prometheus metric measures Error until set")
	f.StringSliceVar(&p.AllowedAddresses, "analysis-allowed-addresses", nil, "other Prometheus URLs an analysis template's own address may name (comma-separated); none by default")
}
